"""The learner stopped mid-epoch and started again on the same state folder: the TrainingWorkflow finishes,
every episode is counted once (workflow, replay, stream) and each epoch's Train makes exactly one version.

Train is held in flight deterministically by stopping the learner's bus before the epoch's last episode
ends: that episode waits in JetStream, so the learner's Train waits for it. The worker restarted
mid-episode is in test_training_workflow.py; here it is restarted while Train is in flight.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState

from evoskill.learner.registry import PolicyRegistry
from evoskill.orchestrator.training.logic import TrainingParams, TrainingResult
from evoskill.orchestrator.training.starter import start_training
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from tests.integration.training_stack import Handle, Stack, client_of, expected_ids, tiny, wait_for
from tests.integration.waiting import until

pytestmark = pytest.mark.integration

TRAIN = "training.train_policy"


def restart_params() -> TrainingParams:
    # One at a time, so "episode k is playing" is a well-defined moment to take the learner away.
    return tiny(episodes_per_epoch=3, eval_episodes=0, parallelism=1, train_wait_s=20.0)


async def train_attempt(handle: Handle, within_s: float = 30.0, at_least: int = 1, started: bool = True) -> int:
    """Wait until the workflow's Train activity is pending at attempt >= `at_least` (and running, if `started`)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        pending = [a for a in (await handle.describe()).raw_description.pending_activities
                   if a.activity_type.name == TRAIN]
        for a in pending:
            running = a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            if a.attempt >= at_least and (running or not started):
                return a.attempt
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"no {TRAIN} attempt >= {at_least}; pending: {pending}")
        await asyncio.sleep(0.1)


def replay_rows(stack: Stack, workflow_id: str) -> list[str]:
    """The episode ids of this workflow in the learner's durable replay, read from its sqlite file."""
    path = stack.settings.state_dir / "learner" / "replay.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT episode_id FROM episodes WHERE episode_id LIKE ?",
                                             (f"{workflow_id}-%",))]


async def assert_counted_once(stack: Stack, handle: Handle, result: TrainingResult, workflow_id: str,
                              params: TrainingParams) -> None:
    expected = expected_ids(workflow_id, params)
    n = len(expected)
    # The workflow: its result and its progress query count each episode once.
    assert result.epochs_completed == 1 and result.episodes_played == n
    assert sorted(result.episode_ids) == sorted(expected)
    progress = await handle.query(TrainingWorkflow.progress)
    assert progress.phase == "done" and progress.episodes_played == n and progress.history[0].train_episodes == n
    # The learner: each episode is in replay once, on disk and in the restarted process.
    assert sorted(replay_rows(stack, workflow_id)) == sorted(expected)
    assert stack.learner is not None
    trainer = stack.learner.trainer
    assert all(trainer.has(e) for e in expected)
    # One version for the epoch's Train, however often it was retried, and numbers with no gap or repeat.
    entries = PolicyRegistry(stack.settings.state_dir / "learner" / "policies").list()
    ours = [e for e in entries if e.request_id.startswith(workflow_id)]
    assert [(e.request_id, e.version) for e in ours] == [(f"{workflow_id}-e0-train", result.policy_version)]
    assert [e.number for e in entries] == list(range(1, len(entries) + 1))
    assert ours[0].metrics["replay_episodes"] == trainer.replay_episodes
    # The planner published each episode once (the watcher sees the stream as the learner does).
    await until(lambda: expected <= set(stack.completed), "every episode on the watcher", 5)
    assert sorted(e for e in stack.completed if e.startswith(workflow_id)) == sorted(expected)


async def train_attempts(handle: Handle) -> int:
    """The attempt at which Train completed (Temporal records the started event of that attempt only)."""
    history = [e async for e in handle.fetch_history_events()]
    trains = {e.event_id for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
              and e.activity_task_scheduled_event_attributes.activity_type.name == TRAIN}
    (attempt,) = [e.activity_task_started_event_attributes.attempt for e in history
                  if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
                  and e.activity_task_started_event_attributes.scheduled_event_id in trains]
    return attempt


async def start(stack: Stack) -> tuple[Handle, str, TrainingParams]:
    params = restart_params()
    workflow_id = f"train-{uuid.uuid4().hex[:8]}"
    handle = await start_training(await client_of(stack.settings), stack.settings, params, workflow_id)
    return handle, workflow_id, params


async def hold_train_in_flight(stack: Stack, handle: Handle) -> None:
    """While the last episode plays, the learner loses its bus: that episode reaches the stream, not replay,
    so Train (attempt 1) waits at the learner for it."""
    await wait_for(handle, lambda p: p.episodes_played == 2 and p.in_flight == 1, what="the last episode")
    assert stack.learner_service is not None
    await stack.learner_service.bus.stop()
    await wait_for(handle, lambda p: p.phase == "training", what="the Train phase")
    assert await train_attempt(handle) == 1


async def test_learner_down_mid_epoch_queues_episodes_and_train_waits_for_its_restart(stack: Stack) -> None:
    handle, workflow_id, params = await start(stack)

    # The first episode is played, the second is playing: the learner goes away.
    await wait_for(handle, lambda p: p.episodes_played == 1 and p.in_flight == 1, what="the second episode")
    await stack.stop_learner()
    # The epoch's episodes finish without it (their events wait in JetStream), and Train fails at least once.
    await wait_for(handle, lambda p: p.phase == "training", what="the Train phase")
    await train_attempt(handle, at_least=2, started=False)
    await stack.start_learner()  # same state folder: replay and registry come back from disk
    result = await handle.result()

    assert await train_attempts(handle) > 1, "Train never ran while the learner was down"
    await assert_counted_once(stack, handle, result, workflow_id, params)


async def test_learner_killed_while_train_waits_for_episodes(stack: Stack) -> None:
    handle, workflow_id, params = await start(stack)

    # Train held in flight; then the learner is killed (no grace) and started again.
    await hold_train_in_flight(stack, handle)
    await asyncio.sleep(0.3)  # the call is at the learner, waiting for the episode
    await stack.stop_learner(grace_s=0.0)
    await stack.start_learner()
    result = await handle.result()

    assert await train_attempts(handle) > 1, "the interrupted Train was not retried"
    await assert_counted_once(stack, handle, result, workflow_id, params)


async def test_worker_restarted_while_train_waits_for_episodes(stack: Stack) -> None:
    """The worker half during Train (the episode half is in test_training_workflow.py)."""
    handle, workflow_id, params = await start(stack)

    # Train held in flight as above (the learner's bus is away); the worker goes, the learner is restarted
    # (the held episode lands), then a new worker retries Train under the same request id.
    await hold_train_in_flight(stack, handle)
    await stack.stop_worker()
    await stack.stop_learner()
    await stack.start_learner()
    await stack.start_worker()
    result = await asyncio.wait_for(handle.result(), 60)

    assert await train_attempts(handle) > 1, "the interrupted Train was not retried"
    await assert_counted_once(stack, handle, result, workflow_id, params)
