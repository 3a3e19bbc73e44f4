"""Recorded workflow histories: the replay test runs the current workflow code against each of them, so a
change that would break a workflow already running (non-determinism) fails the tests.

After an intended change to a workflow's sequence of commands, record them again and commit the files:
    EVOSKILL_RECORD_HISTORIES=1 PYTHONPATH=services python -m pytest -q tests/orchestrator
(the tests that make them write histories/<name>.json; the replay test then checks the new files).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

FOLDER = Path(__file__).parent / "histories"
RECORDING = os.environ.get("EVOSKILL_RECORD_HISTORIES") == "1"


async def keep(handle: WorkflowHandle[Any, Any], name: str) -> None:
    """Write the handle's run history as histories/<name>.json when recording; otherwise nothing."""
    if RECORDING:
        history = await handle.fetch_history()
        (FOLDER / f"{name}.json").write_text(json.dumps(history.to_json_dict(), indent=1) + "\n")
