"""ExplorationWorkflow: a new θ earns its place (seed 004 §5.2: shadow mode, then a canary, then promotion),
and rolls back by itself when it regresses (§4.3).

1. shadow: the baseline plays; at every real step the candidate says what it would do, recorded only. A
   candidate that picks invalid actions or disagrees too often where the baseline won is refused.
2. canary: a deterministic, seeded share of episodes is played with the candidate, the rest with the
   baseline; the candidate passes unless it is worse by more than a margin (one-sided test).
3. promote (SetServing candidate) or roll back (the candidate must not serve: the baseline does).
4. watch: episodes played with what the planner serves for an empty policy_version (the candidate now); a
   regression below the baseline's canary figures rolls back to the baseline.

Every verdict is kept with its figures (query `progress`). Signal `abort` stops at once (running episodes
are cancelled) and rolls back. See docs/exploration.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from evoskill.core.agent import AgentKind
    from evoskill.orchestrator.exploration.activities import ExplorationActivities
    from evoskill.orchestrator.exploration.logic import (
        ArmFigures,
        ExplorationInput,
        ExplorationProgress,
        ExplorationResult,
        Resolved,
        ShadowEpisode,
        ShadowFigures,
        ShadowTask,
        arm_figures,
        canary_arms,
        canary_decision,
        shadow_figures,
        shadow_verdict,
        validate,
        watch_decision,
    )
    from evoskill.orchestrator.training.activities import TrainingActivities
    from evoskill.orchestrator.training.logic import EpisodeResult, EpisodeTask, episode_id, sample_tasks

T = TypeVar("T")
R = TypeVar("R")
EPISODE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                            maximum_interval=timedelta(seconds=30), maximum_attempts=5)
CONTROL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                            maximum_interval=timedelta(seconds=30), maximum_attempts=10)
SHADOW, CANARY, WATCH = 0, 1, 2  # stage numbers: each stage draws its own tasks and episode ids


class Aborted(Exception):
    pass


@workflow.defn
class ExplorationWorkflow:
    @workflow.init
    def __init__(self, input: ExplorationInput) -> None:
        self.params = input.params
        self.stage = "starting"
        self.versions = Resolved(input.params.candidate, input.params.baseline, "", "")
        self.serving = ""
        self.promoted = False
        self.abort_reason: str | None = None
        self.done = 0
        self.total = 0
        self.shadow: ShadowFigures | None = None
        self.canary_baseline: ArmFigures | None = None
        self.canary_candidate: ArmFigures | None = None
        self.watch: ArmFigures | None = None
        self.decisions: list[str] = []

    @workflow.signal
    def abort(self, reason: str) -> None:
        """Stop now and roll back (the candidate does not serve afterwards)."""
        if self.abort_reason is None:
            self.abort_reason = reason or "aborted by signal"

    @workflow.query
    def progress(self) -> ExplorationProgress:
        return ExplorationProgress(
            workflow.info().workflow_id, self.stage, self.versions.candidate, self.versions.baseline, self.done,
            self.total, self.shadow, self.canary_baseline, self.canary_candidate, self.watch, list(self.decisions),
            self.serving, self.abort_reason is not None)

    @workflow.run
    async def run(self, input: ExplorationInput) -> ExplorationResult:
        problems = validate(self.params)
        if problems:
            raise ApplicationError("; ".join(problems), type="InvalidArgument", non_retryable=True)
        self.versions = await workflow.execute_activity_method(
            ExplorationActivities.resolve, args=[self.params.candidate, self.params.baseline],
            start_to_close_timeout=timedelta(seconds=60), retry_policy=CONTROL_RETRY)
        self.serving = self.versions.serving or self.versions.latest
        try:
            outcome, reason = await self._explore()
        except Aborted:
            outcome, reason = "aborted", f"aborted in {self.stage}: {self.abort_reason}"
            await self._roll_back(reason)
        self.stage = "done"
        return ExplorationResult(
            workflow.info().workflow_id, outcome, reason, self.versions.candidate, self.versions.baseline,
            self.serving, self.shadow, self.canary_baseline, self.canary_candidate, self.watch, self.decisions)

    async def _explore(self) -> tuple[str, str]:
        p = self.params
        if p.shadow_episodes:
            self.stage = "shadow"
            self.shadow = shadow_figures(await self._until_aborted(self._shadow()))
            verdict = shadow_verdict(self.shadow, p.thresholds)
            self.decisions.append(verdict.reason)
            if not verdict.passed:
                await self._roll_back(verdict.reason)
                return "refused", verdict.reason

        self.stage = "canary"
        arms = canary_arms(p.seed, p.canary_episodes, p.canary_fraction)
        played = await self._until_aborted(self._play(CANARY, "c", [
            self.versions.candidate if candidate else self.versions.baseline for candidate in arms]))
        self.canary_candidate = arm_figures([r for r, c in zip(played, arms, strict=True) if c])
        self.canary_baseline = arm_figures([r for r, c in zip(played, arms, strict=True) if not c])
        verdict = canary_decision(self.canary_baseline, self.canary_candidate, p.thresholds)
        self.decisions.append(verdict.reason)
        if not verdict.passed:
            await self._roll_back(verdict.reason)
            return "rolled_back", verdict.reason
        self._check_abort()

        self.stage = "promoting"
        reason = f"promoted by {self._me()}: {verdict.reason}"
        await workflow.execute_activity_method(
            ExplorationActivities.promote, args=[self.versions.candidate, reason],
            start_to_close_timeout=timedelta(seconds=60), retry_policy=CONTROL_RETRY)
        self.promoted, self.serving = True, self.versions.candidate
        if not p.watch_episodes:
            return "promoted", verdict.reason

        self.stage = "watch"
        # "" = what the planner serves for an empty policy_version: the promoted candidate, as users get it.
        watched = arm_figures(await self._until_aborted(self._play(WATCH, "w", [""] * p.watch_episodes)))
        self.watch = watched
        kept = watch_decision(self.canary_baseline, watched, p.thresholds)
        self.decisions.append(kept.reason)
        if not kept.passed:
            await self._roll_back(kept.reason)
            return "rolled_back", kept.reason
        return "promoted", f"{verdict.reason}; {kept.reason}"

    def _me(self) -> str:
        return f"exploration {workflow.info().workflow_id}"

    def _check_abort(self) -> None:
        if self.abort_reason is not None:
            raise Aborted()

    async def _until_aborted(self, stage: Awaitable[T]) -> T:
        """Run a stage; an abort signal cancels it (and its running activities) at once."""
        self._check_abort()
        work = asyncio.ensure_future(stage)
        aborted = asyncio.ensure_future(workflow.wait_condition(lambda: self.abort_reason is not None))
        await workflow.wait([work, aborted], return_when=asyncio.FIRST_COMPLETED)
        if work.done():
            aborted.cancel()
            return work.result()
        work.cancel()
        # The stage ends with its activities' cancellation errors: taken here, not logged as never retrieved.
        work.add_done_callback(lambda stopped: stopped.cancelled() or stopped.exception())
        raise Aborted()

    async def _roll_back(self, reason: str) -> None:
        """The candidate must not serve: restore the baseline where it does (the activity checks)."""
        self.stage = "rolling back"
        self.serving = await workflow.execute_activity_method(
            ExplorationActivities.roll_back,
            args=[self.versions.candidate, self.versions.baseline, f"rolled back by {self._me()}: {reason}"],
            start_to_close_timeout=timedelta(seconds=60), retry_policy=CONTROL_RETRY)
        self.promoted = False

    async def _shadow(self) -> list[ShadowEpisode]:
        p = self.params
        tasks = sample_tasks(p.envs, p.seed, SHADOW, p.shadow_episodes, p.fold_size)
        self.total += len(tasks)
        slots = asyncio.Semaphore(p.parallelism)

        async def one(index: int, env: str, seed: int) -> ShadowEpisode:
            async with slots:
                task = ShadowTask(episode_id(workflow.info().workflow_id, SHADOW, "s", index), env, seed, p.fold,
                                  self.versions.baseline, self.versions.candidate, p.simulations, p.max_steps)
                result = await self._episode(ExplorationActivities.shadow_episode, task)
            self.done += 1
            return result

        return list(await asyncio.gather(*(one(i, t.env, t.seed) for i, t in enumerate(tasks))))

    async def _episode(self, activity: Callable[[Any, T], Awaitable[R]], task: T) -> R:
        """One episode activity, with the episode retries, timeout and heartbeat every stage uses."""
        p = self.params
        return await workflow.execute_activity_method(
            activity, task, retry_policy=EPISODE_RETRY, start_to_close_timeout=timedelta(seconds=p.episode_timeout_s),
            heartbeat_timeout=timedelta(seconds=p.heartbeat_timeout_s))

    async def _play(self, stage: int, kind: str, versions: list[str]) -> list[EpisodeResult]:
        """Episode i plays the stage's task i with policy version versions[i] ("" = the serving one)."""
        p = self.params
        tasks = sample_tasks(p.envs, p.seed, stage, len(versions), p.fold_size)
        self.total += len(tasks)
        slots = asyncio.Semaphore(p.parallelism)

        async def one(index: int, version: str) -> EpisodeResult:
            task = EpisodeTask(episode_id(workflow.info().workflow_id, stage, kind, index), tasks[index].env,
                               tasks[index].seed, p.fold, AgentKind.POLICY_MCTS, p.simulations, p.max_steps, version)
            async with slots:
                result = await self._episode(TrainingActivities.play_episode, task)
            self.done += 1
            return result

        return list(await asyncio.gather(*(one(i, v) for i, v in enumerate(versions))))
