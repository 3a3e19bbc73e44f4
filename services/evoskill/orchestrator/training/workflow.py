"""TrainingWorkflow: the outer loop (seed 000 §2.3) as a durable Temporal workflow.

The run's epochs, in one numbering (`logic.stages`): optionally epoch 0 evaluates the starting agent on the
held-out fold before any training ("start"); then, with `demos`, an imitation epoch: the environment's gold
paths go into the learner's offline library and θ is cloned on them (seed 004 §3.1); then the search epochs.
Each search epoch: sample train-fold tasks (deterministic from the seed and the epoch) -> play them as
activities, a few at a time, each with a fixed episode id -> train θ through the learner on exactly those
episodes (mixed with the offline library at `online_fraction`) -> evaluate the new policy on the held-out
fold -> record the epoch. With `tune="es"` each search epoch is also a generation of an evolution strategy
over the search hyper-parameters (seed 000 §2.3 d).

Exactly once: an episode counts when its activity completes, and completions are recorded in history, so a
replay after a worker restart counts nothing twice; an activity interrupted mid-episode is retried with the
same episode id. Signals: pause (no new episode starts), resume, stop (finish this epoch, then end).
Continue-as-new every `continue_as_new_every` epochs carries the state forward.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from evoskill.core.agent import AgentKind
    from evoskill.orchestrator.training.activities import TrainingActivities
    from evoskill.orchestrator.training.logic import (
        ES_PARAMS,
        ES_START,
        EpisodeResult,
        EpisodeTask,
        EpochMetrics,
        LibraryResult,
        LibraryTask,
        Standing,
        Task,
        TrainingInput,
        TrainingProgress,
        TrainingResult,
        TrainResult,
        TrainTask,
        agent_for,
        demo_tasks,
        episode_id,
        es_candidates,
        es_decode,
        es_encode,
        es_perturbations,
        es_update,
        eval_agent_for,
        eval_tasks,
        keeps_serving,
        sample_tasks,
        stages,
        summarise,
        validate,
    )

# Retries outlast a crashed service's restart (a planner compiles its kernels, a learner loads torch: half a
# minute on a loaded machine; `stack.running.WAIT_FOR_RESTART_S`): ~2.5 min of backoff for an episode, ~3 for
# Train. What a retry cannot fix (INVALID_ARGUMENT, NOT_FOUND) fails at once (activities.NON_RETRYABLE).
EPISODE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                            maximum_interval=timedelta(seconds=30), maximum_attempts=10)
TRAIN_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=60), maximum_attempts=8)


@workflow.defn
class TrainingWorkflow:
    @workflow.init
    def __init__(self, input: TrainingInput) -> None:
        self.params = input.params
        self.state = input.state
        if not self.state.history and not self.state.policy_version:  # a fresh run (not a continue-as-new)
            self.state.policy_version = input.params.start_policy
        self.phase = "starting"
        self.in_flight = 0
        self.epoch_results: list[EpisodeResult] = []
        self.epoch_total = 0
        self.counted = set(self.state.episode_ids)
        self.stages = stages(self.params)

    # -- signals and query ------------------------------------------------------------------------------
    @workflow.signal
    def pause(self) -> None:
        self.state.paused = True

    @workflow.signal
    def resume(self) -> None:
        self.state.paused = False

    @workflow.signal
    def stop(self) -> None:
        """Finish the current epoch, then end (a paused run resumes to finish it)."""
        self.state.stopping = True
        self.state.paused = False

    @workflow.query
    def progress(self) -> TrainingProgress:
        results = self.epoch_results
        last = self.state.history[-1] if self.state.history else None
        return TrainingProgress(
            workflow_id=workflow.info().workflow_id, epoch=self.state.epoch, epochs=len(self.stages),
            phase=self.phase, episodes_played=len(self.state.episode_ids), epoch_episodes_done=len(results),
            epoch_episodes_total=self.epoch_total, in_flight=self.in_flight,
            mean_reward=summarise(results).mean_reward if results else (last.train_mean_reward if last else None),
            losses=last.losses if last else {}, policy_version=self.state.policy_version,
            paused=self.state.paused, stopping=self.state.stopping, history=self.state.history,
            stage=self.stages[self.state.epoch] if self.state.epoch < len(self.stages) else "")

    # -- the loop ---------------------------------------------------------------------------------------
    @workflow.run
    async def run(self, input: TrainingInput) -> TrainingResult:
        problems = validate(self.params)
        if problems:
            raise ApplicationError("; ".join(problems), type="InvalidArgument", non_retryable=True)
        if self.params.tune == "es" and not self.state.es_mean:
            self.state.es_mean = es_encode(ES_START)
        first_epoch = self.state.epoch
        run_stage = {"start": self._start, "imitation": self._imitation, "search": self._search}
        while self.state.epoch < len(self.stages) and not self.state.stopping:
            await run_stage[self.stages[self.state.epoch]](self.state.epoch)
            self.state.epoch += 1
            done = self.state.stopping or self.state.epoch >= len(self.stages)
            if not done and (self.state.epoch - first_epoch >= self.params.continue_as_new_every
                             or workflow.info().is_continue_as_new_suggested()):
                self.phase = "continuing as new"
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(TrainingInput(self.params, self.state))
        self.phase = "done"
        s = self.state
        return TrainingResult(workflow.info().workflow_id, len(s.history), len(s.episode_ids), s.episode_ids,
                              s.eval_episodes, s.policy_version, s.stopping, s.history, s.es_best,
                              s.es_best_fitness)

    async def _start(self, epoch: int) -> None:
        """Epoch 0: where the agent starts — the held-out games before any training."""
        search = es_decode(self.state.es_mean) if self.params.tune == "es" else {}
        await self._evaluate_and_record(epoch, "start", "", [], search=search,
                                        train=TrainResult(self.state.policy_version, {}, 0, note="before training"))

    async def _imitation(self, epoch: int) -> None:
        """The environment's gold paths into the learner's offline library, then behaviour cloning on the
        library alone (online_fraction 0: a one-hot target on each demonstrated action)."""
        p = self.params
        self.phase, self.epoch_results, self.epoch_total = f"building the offline library ({p.demos} gold paths)", [], 0
        library: LibraryResult = await workflow.execute_activity_method(
            TrainingActivities.build_library,
            LibraryTask(demo_tasks(p.envs, p.seed, p.demos, p.fold_size), p.train_fold, p.parallelism),
            start_to_close_timeout=timedelta(seconds=p.episode_timeout_s), retry_policy=EPISODE_RETRY,
            heartbeat_timeout=timedelta(seconds=p.heartbeat_timeout_s))
        train = await self._train(epoch, p.imitation_steps or p.train_steps, [], online_fraction=0.0)
        train.note = (f"cloned on {library.episodes} gold paths ({library.won} won, {library.steps} steps); "
                      f"library {library.library_episodes} episodes")
        await self._evaluate_and_record(epoch, "imitation", AgentKind.DEMO, [], train=train,
                                        library_episodes=library.library_episodes)

    async def _search(self, epoch: int) -> None:
        p = self.params
        tasks = sample_tasks(p.envs, p.seed, epoch, p.episodes_per_epoch, p.fold_size)
        agent = agent_for(self.state.policy_version)
        self.epoch_results = []
        fitness: list[float] = []
        search: dict[str, float] = {}
        if p.tune == "es":
            played, fitness = await self._es_generation(epoch, tasks, agent)
            search = es_decode(self.state.es_mean)
        else:
            self.epoch_total = len(tasks)
            played = await self._play_all([self._task(epoch, "t", i, t, p.train_fold, agent) for i, t in
                                           enumerate(tasks)], count=True)
        train = TrainResult(self.state.policy_version, {}, 0, note="training off")
        if p.train:
            train = await self._train(epoch, p.train_steps, [r.episode_id for r in played], p.online_fraction)
        await self._evaluate_and_record(epoch, "search", agent, played, train, search, fitness)

    async def _train(self, epoch: int, steps: int, episode_ids: list[str],
                     online_fraction: float | None) -> TrainResult:
        """One Train through the learner (waiting for `episode_ids` to reach replay), starting from the θ that
        serves; θ's new version is used from here on (until `_evaluate_and_record` says otherwise)."""
        p = self.params
        self.phase = "training"
        train: TrainResult = await workflow.execute_activity_method(
            TrainingActivities.train_policy,
            TrainTask(steps, p.batch_size, p.seed * 1000 + epoch + 1, episode_ids, p.train_wait_s,
                      f"{workflow.info().workflow_id}-e{epoch}-train", online_fraction, self.state.policy_version),
            start_to_close_timeout=timedelta(seconds=p.train_wait_s + 3600), retry_policy=TRAIN_RETRY,
            heartbeat_timeout=timedelta(seconds=p.heartbeat_timeout_s))
        if train.policy_version:
            self.state.policy_version = train.policy_version
        return train

    async def _evaluate_and_record(self, epoch: int, stage: str, agent: str, played: list[EpisodeResult],
                                   train: TrainResult, search: dict[str, float] | None = None,
                                   fitness: list[float] | None = None, library_episodes: int = 0) -> None:
        """The held-out games with the policy as it now is, then the epoch's record (JSONL, TensorBoard)."""
        p = self.params
        self.phase = "evaluating"
        eval_agent = eval_agent_for(p.eval_agent, self.state.policy_version)
        evaluated = await self._play_all([self._task(epoch, "v", i, t, p.eval_fold, eval_agent, search)
                                          for i, t in enumerate(eval_tasks(p.envs, p.eval_episodes))])
        self.state.eval_episodes += len(evaluated)
        trained, held_out = summarise(played), summarise(evaluated)
        evaluated_version = self.state.policy_version
        note = "; ".join(filter(None, [train.note, self._serve_best(Standing(evaluated_version, held_out.success,
                                                                             held_out.mean_score))]))
        metrics = EpochMetrics(
            epoch=epoch, agent=agent, train_episodes=trained.episodes, train_mean_reward=trained.mean_reward,
            train_success=trained.success, train_mean_score=trained.mean_score, eval_episodes=held_out.episodes,
            eval_success=held_out.success, eval_mean_reward=held_out.mean_reward, eval_mean_score=held_out.mean_score,
            policy_version=evaluated_version, losses=train.losses, samples=train.samples, note=note,
            search=search or {}, es_fitness=fitness or [], stage=stage, eval_agent=eval_agent,
            library_episodes=library_episodes, serving_version=self.state.policy_version)
        self.phase = "recording"
        await workflow.execute_activity_method(
            TrainingActivities.record_epoch, args=[workflow.info().workflow_id, p.metrics_dir, metrics],
            start_to_close_timeout=timedelta(seconds=60), retry_policy=EPISODE_RETRY)
        self.state.history.append(metrics)

    def _serve_best(self, candidate: Standing) -> str:
        """keep_best: the best θ so far goes on serving (and the next Train starts from it) when `candidate` did
        worse on the held-out games, so a bad update is not built upon; returns what to note, if anything."""
        best = self.state.best
        if self.params.keep_best and best is not None and best.version != candidate.version \
                and keeps_serving(best, candidate):
            self.state.policy_version = best.version
            return (f"{best.version} kept serving: {candidate.version} won {candidate.success:.0%} of the held-out "
                    f"games (score {candidate.score:.3f}) against {best.success:.0%} ({best.score:.3f})")
        self.state.best = candidate
        return ""

    async def _es_generation(self, epoch: int, tasks: list[Task], agent: str) -> tuple[list[EpisodeResult],
                                                                                       list[float]]:
        """Every candidate plays the epoch's tasks (common random numbers); the mean moves towards the better."""
        p = self.params
        directions = es_perturbations(p.seed, epoch, p.es_population, len(ES_PARAMS))
        candidates = es_candidates(self.state.es_mean, directions, p.es_sigma)
        self.epoch_total = len(candidates) * len(tasks)
        plays = [self._task(epoch, f"c{c:02d}t", i, t, p.train_fold, agent, es_decode(z))
                 for c, z in enumerate(candidates) for i, t in enumerate(tasks)]
        played = await self._play_all(plays, count=True)
        fitness = [summarise(played[c * len(tasks):(c + 1) * len(tasks)]).mean_reward for c in range(len(candidates))]
        best = max(range(len(fitness)), key=fitness.__getitem__)
        if self.state.es_best_fitness is None or fitness[best] > self.state.es_best_fitness:
            self.state.es_best, self.state.es_best_fitness = es_decode(candidates[best]), fitness[best]
        self.state.es_mean = es_update(self.state.es_mean, directions, fitness, p.es_sigma, p.es_lr)
        return played, fitness

    def _task(self, epoch: int, kind: str, index: int, task: Task, fold: str, agent: str,
              search: dict[str, float] | None = None) -> EpisodeTask:
        p = self.params
        search = dict(search or {})
        search |= {k: v for k, v in (("memory_weight", p.memory_weight), ("entropy_trigger", p.entropy_trigger))
                   if v is not None}  # how the agent plays, in every game
        if fold == p.train_fold:  # exploration is for the games θ learns from; the held-out ones measure it
            search |= {k: v for k, v in (("explore_epsilon", p.explore_epsilon), ("novelty_weight", p.novelty_weight),
                                         ("curiosity_weight", p.curiosity_weight)) if v}
        else:  # not even the planner's own ε (search.explore_epsilon): a random step measures only its damage
            search["explore_epsilon"] = 0.0
        return EpisodeTask(episode_id(workflow.info().workflow_id, epoch, kind, index), task.env, task.seed, fold,
                           agent, p.simulations, p.max_steps, self.state.policy_version, search, p.search_algorithm)

    async def _play_all(self, tasks: list[EpisodeTask], count: bool = False) -> list[EpisodeResult]:
        """Play tasks `parallelism` at a time, in order of the list; none starts while paused."""
        self.phase = "playing" if count else "evaluating"
        slots = asyncio.Semaphore(self.params.parallelism)

        async def one(task: EpisodeTask) -> EpisodeResult:
            async with slots:
                await workflow.wait_condition(lambda: not self.state.paused)
                self.in_flight += 1
                try:
                    result = await workflow.execute_activity_method(
                        TrainingActivities.play_episode, task,
                        start_to_close_timeout=timedelta(seconds=self.params.episode_timeout_s),
                        heartbeat_timeout=timedelta(seconds=self.params.heartbeat_timeout_s),
                        retry_policy=EPISODE_RETRY)
                finally:
                    self.in_flight -= 1
            if count and result.episode_id not in self.counted:
                self.counted.add(result.episode_id)
                self.state.episode_ids.append(result.episode_id)
                self.epoch_results.append(result)
            return result

        return list(await asyncio.gather(*(one(t) for t in tasks)))
