"""ExplorationWorkflow on the time-skipping test server with test doubles of its activities: shadow pass and
fail, canary pass (promote) and fail (roll back), a regression in the watch window (automatic rollback), the
abort signal in a stage, and bad input. The real activities against real services are tested in
tests/integration/test_exploration_workflow.py."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from evoskill.orchestrator.exploration.logic import (
    ExplorationInput,
    ExplorationParams,
    ExplorationResult,
    Thresholds,
    canary_arms,
)
from evoskill.orchestrator.exploration.worker import REGISTRATION as EXPLORATION
from evoskill.orchestrator.exploration.workflow import ExplorationWorkflow
from evoskill.orchestrator.training.logic import episode_id
from tests.orchestrator.conftest import worker
from tests.orchestrator.doubles import Exploration, Registry
from tests.orchestrator.histories import keep

BASELINE, CANDIDATE = "v000001", "v000002"
Handle = WorkflowHandle[ExplorationWorkflow, ExplorationResult]


def fake(candidate_reward: float, shadow_valid: bool = True) -> Exploration:
    """The baseline serves and earns 1.0 an episode; the candidate earns `candidate_reward`."""
    return Exploration(Registry(BASELINE, [BASELINE, CANDIDATE]), {BASELINE: 1.0, CANDIDATE: candidate_reward},
                       shadow_valid)


def params(**overrides: object) -> ExplorationParams:
    fields: dict[str, object] = {"candidate": CANDIDATE, "envs": ["twx:coin"], "shadow_episodes": 0,
                                 "canary_episodes": 4, "watch_episodes": 0, "seed": 5, "heartbeat_timeout_s": 3600.0}
    fields.update(overrides)
    return ExplorationParams(**fields)  # type: ignore[arg-type]


async def start(env: WorkflowEnvironment, task_queue: str, p: ExplorationParams) -> Handle:
    return await env.client.start_workflow(ExplorationWorkflow.run, ExplorationInput(p),
                                           id=f"explore-{uuid.uuid4().hex[:8]}", task_queue=task_queue)


async def explore(env: WorkflowEnvironment, activities: Exploration, p: ExplorationParams) -> tuple[Handle,
                                                                                                   ExplorationResult]:
    async with worker(env, EXPLORATION, activities.all()) as queue:
        handle = await start(env, queue, p)
        return handle, await handle.result()


async def test_shadow_canary_and_watch_pass_and_the_candidate_serves(env: WorkflowEnvironment) -> None:
    activities = fake(candidate_reward=1.0)
    p = params(shadow_episodes=2, watch_episodes=2)
    handle, result = await explore(env, activities, p)

    assert result.outcome == "promoted" and result.serving == CANDIDATE and result.baseline == BASELINE
    assert [d.split(":")[0] for d in result.decisions] == ["shadow", "canary", "watch"]
    # Shadow: the baseline acts, the candidate is asked at every step.
    assert [(t.baseline, t.candidate) for t in activities.shadowed] == [(BASELINE, CANDIDATE)] * 2
    assert result.shadow is not None and result.shadow.steps == 6 and result.shadow.agreement == 1.0
    # Canary: the seeded split decides which episodes the candidate plays.
    canary = {t.episode_id: t.policy_version for t in activities.attempts if "-e0001-c" in t.episode_id}
    arms = canary_arms(p.seed, p.canary_episodes, p.canary_fraction)
    assert canary == {episode_id(handle.id, 1, "c", i): CANDIDATE if a else BASELINE for i, a in enumerate(arms)}
    assert result.canary_candidate is not None and result.canary_candidate.episodes == sum(arms)
    # Promoted, with a reason naming the workflow; the watch plays what serves ("").
    assert activities.registry.changes == [("promote", CANDIDATE, f"promoted by exploration {handle.id}: "
                                                                  f"{result.decisions[1]}")]
    watched = [t for t in activities.attempts if "-e0002-w" in t.episode_id]
    assert [t.policy_version for t in watched] == ["", ""] and result.watch is not None
    await keep(handle, "exploration_promoted")


async def test_a_candidate_choosing_invalid_actions_in_shadow_is_refused_before_it_plays(
        env: WorkflowEnvironment) -> None:
    activities = fake(candidate_reward=1.0, shadow_valid=False)
    _, result = await explore(env, activities, params(shadow_episodes=1))

    assert result.outcome == "refused" and result.reason.startswith("shadow: 3 invalid")
    assert result.canary_candidate is None and not activities.attempts  # no canary episode was played
    assert result.serving == BASELINE and not activities.registry.changes


@pytest.mark.parametrize(("candidate_reward", "outcome"), [(0.8, "promoted"), (0.0, "rolled_back")])
async def test_the_canary_promotes_within_the_margin_and_rolls_back_beyond_it(
        env: WorkflowEnvironment, candidate_reward: float, outcome: str) -> None:
    """Default reward margin 0.5: a candidate 0.2 short passes, one 1.0 short (and never winning) does not."""
    activities = fake(candidate_reward)
    _, result = await explore(env, activities, params())

    assert result.outcome == outcome and result.shadow is None and result.watch is None
    assert result.decisions == [result.reason]
    if outcome == "promoted":
        assert result.serving == CANDIDATE and [c[0] for c in activities.registry.changes] == ["promote"]
    else:
        assert "regressed on success" in result.reason and "mean_reward" in result.reason
        assert result.serving == BASELINE and not activities.registry.changes  # it never served


async def test_a_regression_in_the_watch_window_rolls_back_by_itself(env: WorkflowEnvironment) -> None:
    """0.2 short of the baseline passes the canary (margin 0.5) but not the stricter watch margin (0.1)."""
    activities = fake(candidate_reward=0.8)
    p = params(watch_episodes=2, thresholds=Thresholds(watch_reward_margin=0.1))
    handle, result = await explore(env, activities, p)

    assert result.outcome == "rolled_back" and result.reason.startswith("watch:") and "mean_reward" in result.reason
    assert [d.split(":")[0] for d in result.decisions] == ["canary", "watch"]
    assert [c[:2] for c in activities.registry.changes] == [("promote", CANDIDATE), ("roll_back", BASELINE)]
    assert activities.registry.changes[1][2] == f"rolled back by exploration {handle.id}: {result.reason}"
    assert result.serving == BASELINE and result.watch is not None and result.watch.mean_reward == 0.8
    await keep(handle, "exploration_watch_rollback")


@pytest.mark.parametrize(("stage", "number", "changes"), [
    ("canary", 1, []),
    ("watch", 2, [("promote", CANDIDATE), ("roll_back", BASELINE)]),
])
async def test_abort_cancels_the_stage_and_the_baseline_serves(
        env: WorkflowEnvironment, stage: str, number: int, changes: list[tuple[str, str]]) -> None:
    """The stage's episodes never finish by themselves: the abort signal arrives while they play. Both slots
    (parallelism 2) are held first, so no episode is between scheduled and started when the abort cancels
    them: the time-skipping server rejects that cancellation (temporalio/sdk-java#2391), a real one does not."""
    activities = fake(candidate_reward=1.0)
    activities.hold = lambda task: f"-e{number:04d}-" in task.episode_id
    async with worker(env, EXPLORATION, activities.all()) as queue:
        handle = await start(env, queue, params(watch_episodes=2))
        for _ in range(2):
            await activities.next_held()
        progress = await handle.query(ExplorationWorkflow.progress)
        assert progress.stage == stage and not progress.aborting and progress.episodes_done < progress.episodes_total
        await handle.signal(ExplorationWorkflow.abort, "operator saw a regression")
        result = await handle.result()

    assert result.outcome == "aborted" and result.reason == f"aborted in {stage}: operator saw a regression"
    assert [c[:2] for c in activities.registry.changes] == changes and result.serving == BASELINE
    assert result.watch is None  # the stage never finished
    if stage == "watch":
        assert progress.serving == CANDIDATE
        await keep(handle, "exploration_aborted_in_watch")


async def test_bad_parameters_fail_the_workflow_naming_them(env: WorkflowEnvironment) -> None:
    activities = fake(candidate_reward=1.0)
    with pytest.raises(WorkflowFailureError) as failure:
        await explore(env, activities, params(canary_episodes=1, canary_fraction=1.5))
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidArgument"
    assert "canary_episodes must be >= 2" in cause.message and "canary_fraction must be in (0, 1)" in cause.message
    assert not activities.attempts and not activities.registry.changes
