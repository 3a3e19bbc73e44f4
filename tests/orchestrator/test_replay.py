"""The current workflow code replays every recorded history (histories/*.json) without non-determinism.

A change that alters what a workflow does at a step already in a running workflow's history (another
activity, another order, a timer added) fails here. For an intended change, re-record (see histories.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from evoskill.orchestrator.worker import WORKFLOWS
from tests.orchestrator.histories import FOLDER, RECORDING

# One history per kind of run the tests record: every one must be there, so none is silently lost.
RECORDED = ("exploration_aborted_in_watch", "exploration_promoted", "exploration_watch_rollback", "health_memory_down",
            "training_continue_as_new", "training_es", "training_pause_resume_stop", "training_start_imitation_search")


def load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def test_every_recorded_history_is_there() -> None:
    assert sorted(p.stem for p in FOLDER.glob("*.json")) == sorted(RECORDED)


@pytest.mark.parametrize("path", [FOLDER / f"{name}.json" for name in RECORDED], ids=RECORDED)
async def test_the_workflow_code_replays_the_history(path: Path) -> None:
    if RECORDING:
        pytest.skip("recording: run again without EVOSKILL_RECORD_HISTORIES to replay the new histories")
    history = load(path)
    result = await Replayer(workflows=WORKFLOWS).replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:
        pytest.fail(f"{path.name} no longer replays: {result.replay_failure}")
