"""TrainingWorkflow on the time-skipping test server with test doubles of its activities: every branch of the
epoch loop (continue-as-new, pause/resume/stop, demonstrations, ES tuning, retries, training off, bad input).
The real activities against real services are tested in tests/integration/test_training_workflow.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from evoskill.orchestrator.training.logic import (
    EpisodeTask,
    TrainingInput,
    TrainingParams,
    TrainingProgress,
    TrainingResult,
    episode_id,
    sample_tasks,
)
from evoskill.orchestrator.training.worker import REGISTRATION as TRAINING
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from tests.orchestrator.conftest import worker
from tests.orchestrator.doubles import Outcome, Training
from tests.orchestrator.histories import keep

Handle = WorkflowHandle[TrainingWorkflow, TrainingResult]


def params(**overrides: object) -> TrainingParams:
    fields: dict[str, object] = {"envs": ["twx:coin", "twx:map"], "epochs": 1, "episodes_per_epoch": 2,
                                 "eval_episodes": 1, "parallelism": 2, "seed": 3, "heartbeat_timeout_s": 3600.0}
    fields.update(overrides)
    return TrainingParams(**fields)  # type: ignore[arg-type]


def by_seed(task: EpisodeTask) -> Outcome:
    """Odd seeds win; the reward is the seed, so every mean the workflow reports can be checked."""
    return Outcome(task.seed % 2 == 1, float(task.seed))


def train_ids(workflow_id: str, epochs: range, count: int) -> list[str]:
    return [episode_id(workflow_id, e, "t", i) for e in epochs for i in range(count)]


async def start(env: WorkflowEnvironment, task_queue: str, p: TrainingParams, **options: object) -> Handle:
    return await env.client.start_workflow(TrainingWorkflow.run, TrainingInput(p), id=f"train-{uuid.uuid4().hex[:8]}",
                                           task_queue=task_queue, **options)  # type: ignore[arg-type]


async def progress_when(handle: Handle, condition: Callable[[TrainingProgress], bool]) -> TrainingProgress:
    for _ in range(600):
        progress = await handle.query(TrainingWorkflow.progress)
        if condition(progress):
            return progress
        await asyncio.sleep(0.05)
    raise AssertionError(f"progress never reached the condition; last: {progress}")


async def test_epochs_train_evaluate_record_and_continue_as_new(env: WorkflowEnvironment) -> None:
    fake = Training(by_seed)
    p = params(epochs=3, continue_as_new_every=2)
    async with worker(env, TRAINING, fake.all()) as queue:
        handle = await start(env, queue, p)
        result = await handle.result()
        done = await handle.query(TrainingWorkflow.progress)  # a worker answers queries, also of closed runs
    assert done.phase == "done" and done.epoch == 3 and done.episodes_played == 6 and len(done.history) == 3
    wid = handle.id

    # Every train episode counted once, under the id of its workflow, epoch and slot.
    assert result.epochs_completed == 3 and result.episodes_played == 6 and result.eval_episodes == 3
    assert sorted(result.episode_ids) == sorted(train_ids(wid, range(3), 2))
    # Each epoch trained on exactly its own episodes, with its idempotency key and seed.
    assert [t.episode_ids for t in fake.trained] == [train_ids(wid, range(e, e + 1), 2) for e in range(3)]
    assert [(t.request_id, t.seed) for t in fake.trained] == [(f"{wid}-e{e}-train", 3000 + e + 1) for e in range(3)]
    # MCTS until a policy exists; then each epoch plays and is evaluated with the newest version, also after
    # the state crossed continue-as-new (epoch 2 runs in the second run).
    played = {t.episode_id: t for t in fake.attempts}
    assert [(played[episode_id(wid, e, "t", 0)].agent, played[episode_id(wid, e, "t", 0)].policy_version)
            for e in range(3)] == [("mcts", ""), ("policy+mcts", "v000001"), ("policy+mcts", "v000002")]
    evaluated = [played[episode_id(wid, e, "v", 0)] for e in range(3)]
    assert [(t.fold, t.policy_version, t.seed) for t in evaluated] == [("dev", f"v{e + 1:06d}", 0) for e in range(3)]
    assert [m.policy_version for m in result.history] == ["v000001", "v000002", "v000003"]
    assert result.policy_version == "v000003"
    # The recorded epochs carry the figures of their episodes.
    assert [(w, m.epoch) for w, m in fake.recorded] == [(wid, 0), (wid, 1), (wid, 2)]
    first = result.history[0]
    seeds = [t.seed for t in sample_tasks(p.envs, p.seed, 0, 2, p.fold_size)]
    assert first.train_mean_reward == sum(seeds) / 2 and first.train_success == sum(s % 2 for s in seeds) / 2
    assert first.losses == {"loss": 1.0} and first.samples == 16

    # continue_as_new_every=2: the first run handed epochs 0-1 over to a second run, which finished.
    first_run = env.client.get_workflow_handle(wid, run_id=handle.first_execution_run_id)
    assert (await first_run.describe()).status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
    last = [e async for e in first_run.fetch_history_events()][-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    second_run = env.client.get_workflow_handle(wid, run_id=last.workflow_execution_continued_as_new_event_attributes
                                                .new_execution_run_id)
    assert (await second_run.describe()).status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    await keep(first_run, "training_continue_as_new")


async def test_pause_holds_new_episodes_resume_plays_and_stop_ends_after_the_epoch(env: WorkflowEnvironment) -> None:
    fake = Training(by_seed)
    p = params(epochs=3, episodes_per_epoch=3, eval_episodes=0, parallelism=1, train=False)
    fake.hold = lambda task: task.episode_id.endswith("t000")
    async with worker(env, TRAINING, fake.all()) as queue:
        handle = await start(env, queue, p, start_signal="pause")

        # Started paused: the epoch began, nothing plays.
        paused = await progress_when(handle, lambda g: g.phase == "playing")
        assert paused.paused and paused.in_flight == 0 and paused.episodes_played == 0 and not fake.attempts
        assert paused.epoch_episodes_total == 3 and paused.mean_reward is None

        await handle.signal(TrainingWorkflow.resume)
        await fake.next_held()
        playing = await progress_when(handle, lambda g: g.in_flight == 1)
        assert not playing.paused and playing.episodes_played == 0 and playing.epoch == 0

        # Pause while an episode plays: it finishes and counts, no further one starts.
        await handle.signal(TrainingWorkflow.pause)
        fake.release.set()
        held = await progress_when(handle, lambda g: g.episodes_played == 1 and g.in_flight == 0)
        assert held.paused and held.epoch_episodes_done == 1 and held.mean_reward == fake.attempts[0].seed
        assert not (await handle.describe()).raw_description.pending_activities
        assert len(fake.attempts) == 1

        # Stop while paused: the epoch is finished (its other two episodes), then the run ends.
        await handle.signal(TrainingWorkflow.stop)
        result = await handle.result()
    assert result.stopped and result.epochs_completed == 1 and len(fake.recorded) == 1
    assert sorted(result.episode_ids) == sorted(train_ids(handle.id, range(1), 3))
    assert result.history[0].note == "training off" and not fake.trained
    await keep(handle, "training_pause_resume_stop")


async def test_a_retried_episode_plays_again_under_its_id_and_counts_once(env: WorkflowEnvironment) -> None:
    fake = Training(by_seed)
    p = params(epochs=2, eval_episodes=0)
    async with worker(env, TRAINING, fake.all()) as queue:
        handle = await start(env, queue, p)
        retried = episode_id(handle.id, 0, "t", 1)
        fake.fail_first = {retried}
        result = await handle.result()

    assert [t.episode_id for t in fake.attempts].count(retried) == 2
    assert sorted(result.episode_ids) == sorted(train_ids(handle.id, range(2), 2))
    assert result.history[0].train_episodes == 2
    assert fake.trained[0].episode_ids == train_ids(handle.id, range(1), 2)  # trained on it once


async def test_start_then_imitation_then_search_in_one_epoch_numbering(env: WorkflowEnvironment) -> None:
    """The main job's shape: epoch 0 evaluates the starting agent, epoch 1 clones θ on gold paths, then search."""
    fake = Training(by_seed)
    p = params(evaluate_start=True, demos=3, imitation_steps=7, train_steps=2, epochs=2, episodes_per_epoch=1,
               online_fraction=0.25, eval_agent="policy", search_algorithm="gumbel")
    async with worker(env, TRAINING, fake.all()) as queue:
        handle = await start(env, queue, p)
        result = await handle.result()
    wid = handle.id

    assert [(m.epoch, m.stage) for m in result.history] == [(0, "start"), (1, "imitation"), (2, "search"),
                                                             (3, "search")]
    assert [w_m[1].epoch for w_m in fake.recorded] == [0, 1, 2, 3]  # the JSONL and TensorBoard use the same
    # The gold paths went to the library in one activity (train fold, `parallelism` workers), not as episodes.
    (library,) = fake.libraries
    assert len(library.tasks) == 3 and library.fold == "train" and library.workers == p.parallelism
    assert not [t for t in fake.attempts if t.agent == "demo"]
    # Cloning: the library alone, for imitation_steps; the search epochs train on their games, mixed.
    cloning, *searching = fake.trained
    assert (cloning.steps, cloning.episode_ids, cloning.online_fraction) == (7, [], 0.0)
    assert [(t.steps, t.episode_ids, t.online_fraction) for t in searching] == [
        (2, train_ids(wid, range(e, e + 1), 1), 0.25) for e in (2, 3)]
    # Held-out games: θ alone, and before any θ exists the random agent (θ's uniform prior); the same games.
    evaluated = sorted((t for t in fake.attempts if t.fold == "dev"), key=lambda t: t.episode_id)
    assert [(t.episode_id, t.agent, t.policy_version) for t in evaluated] == [
        (episode_id(wid, e, "v", 0), agent, version)
        for e, agent, version in ((0, "random", ""), (1, "policy", "v000001"), (2, "policy", "v000002"),
                                  (3, "policy", "v000003"))]
    first, imitation, *_ = result.history
    assert (first.eval_agent, first.train_episodes, first.losses, first.policy_version) == ("random", 0, {}, "")
    assert imitation.library_episodes == 3 and "3 gold paths" in imitation.note and imitation.losses
    # Search epochs play with θ's search; only their games count as training episodes.
    assert {(t.agent, t.algorithm) for t in fake.attempts if t.fold == "train"} == {("policy+mcts", "gumbel")}
    assert sorted(result.episode_ids) == sorted(train_ids(wid, range(2, 4), 1))
    await keep(handle, "training_start_imitation_search")


async def test_es_candidates_share_tasks_and_the_mean_moves_to_the_fitter(env: WorkflowEnvironment) -> None:
    fake = Training(lambda task: Outcome(False, task.search["c_puct"]))  # a larger c_puct is fitter here
    p = params(epochs=2, tune="es", es_population=2, train=False)
    async with worker(env, TRAINING, fake.all()) as queue:
        handle = await start(env, queue, p)
        result = await handle.result()

    attempts = sorted(fake.attempts, key=lambda t: t.episode_id)
    for epoch, generation in enumerate(result.history):
        plays = {c: [t for t in attempts if t.episode_id.startswith(f"{handle.id}-e{epoch:04d}-c{c:02d}t")]
                 for c in (0, 1)}
        # Common random numbers: both candidates played the epoch's tasks, each under its own id.
        assert [t.seed for t in plays[0]] == [t.seed for t in plays[1]] and len(plays[0]) == 2
        configs = [plays[c][0].search for c in (0, 1)]
        assert generation.es_fitness == [configs[0]["c_puct"], configs[1]["c_puct"]]
        # One antithetic pair and lr 1: the mean lands on the fitter candidate, and evaluation uses it.
        fitter = configs[generation.es_fitness.index(max(generation.es_fitness))]
        assert generation.search == pytest.approx(fitter)
        (evaluation,) = [t for t in fake.attempts if t.episode_id == episode_id(handle.id, epoch, "v", 0)]
        assert evaluation.search == pytest.approx({**generation.search, "explore_epsilon": 0.0})  # held out: no ε
    assert result.history[1].search["c_puct"] > result.history[0].search["c_puct"]
    # The best candidate seen over all generations is reported with its fitness.
    best = max((t for t in fake.attempts if "-c0" in t.episode_id), key=lambda t: t.search["c_puct"])
    assert result.es_best == pytest.approx(best.search) and result.es_best_fitness == best.search["c_puct"]
    assert result.episodes_played == 8
    await keep(handle, "training_es")


async def test_bad_parameters_fail_the_workflow_naming_them(env: WorkflowEnvironment) -> None:
    fake = Training(by_seed)
    async with worker(env, TRAINING, fake.all()) as queue:
        handle = await start(env, queue, params(epochs=0, tune="cma", explore_epsilon=1.5))
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidArgument" and cause.non_retryable
    assert "epochs must be >= 1" in cause.message and "tune must be one of" in cause.message
    assert "explore_epsilon must be in [0, 1] (got 1.5)" in cause.message
    assert not fake.attempts


async def test_a_worse_theta_does_not_serve_and_the_next_update_starts_from_the_best(env: WorkflowEnvironment) -> None:
    """keep_best: v1 loses the held-out games v0 won, so v0 goes on serving the next epoch's games and the next
    Train starts from v0; v2 wins them again and serves. keep_best off: every new θ serves."""
    wins = {"v000000": True, "v000001": False, "v000002": True, "v000003": True}

    def by_version(task: EpisodeTask) -> Outcome:
        return Outcome(wins[task.policy_version], 1.0)

    for keep_best in (True, False):
        fake = Training(by_version)
        p = params(epochs=3, episodes_per_epoch=1, eval_agent="policy", start_policy="v000000",
                   evaluate_start=True, keep_best=keep_best)
        async with worker(env, TRAINING, fake.all()) as queue:
            result = await (await start(env, queue, p)).result()
        serving = [(m.policy_version, m.serving_version) for m in result.history]
        froms = [t.from_version for t in fake.trained]
        played = [t.policy_version for t in fake.attempts if t.fold == "train"]
        if keep_best:
            assert serving == [("v000000", "v000000"), ("v000001", "v000000"), ("v000002", "v000002"),
                               ("v000003", "v000003")]
            assert "v000000 kept serving: v000001 won 0%" in result.history[1].note
            assert froms == played == ["v000000", "v000000", "v000002"]
        else:
            assert [s for _, s in serving] == ["v000000", "v000001", "v000002", "v000003"]
            assert froms == played == ["v000000", "v000001", "v000002"]
        assert result.policy_version == "v000003"


async def test_exploration_is_asked_for_on_the_training_games_only(env: WorkflowEnvironment) -> None:
    fake = Training(by_seed)
    async with worker(env, TRAINING, fake.all()) as queue:
        await (await start(env, queue, params(explore_epsilon=0.2, novelty_weight=0.5))).result()
    folds = {t.fold: t.search for t in fake.attempts}
    assert folds["train"] == {"explore_epsilon": 0.2, "novelty_weight": 0.5}
    assert folds["dev"] == {"explore_epsilon": 0.0}  # the held-out games measure θ as it serves: not the planner's ε


async def test_memory_and_the_entropy_trigger_reach_every_game_curiosity_the_training_ones(
        env: WorkflowEnvironment) -> None:
    fake = Training(by_seed)
    async with worker(env, TRAINING, fake.all()) as queue:
        await (await start(env, queue, params(memory_weight=0.0, entropy_trigger=0.3, curiosity_weight=0.2))).result()
    folds = {t.fold: t.search for t in fake.attempts}
    assert folds["train"] == {"memory_weight": 0.0, "entropy_trigger": 0.3, "curiosity_weight": 0.2}
    assert folds["dev"] == {"memory_weight": 0.0, "entropy_trigger": 0.3, "explore_epsilon": 0.0}
