"""`evoskill train --detach` and `evoskill runs …` through the CLI, against the training services of this
module's stack on the session's Temporal dev server.

The orchestrator's worker is stopped while the runs are started and signalled, so what the commands do does
not race the run: the pause and the cancel are in each run's history before its first workflow task. The
commands run in-process (in a thread: the services answer on this test's event loop), as a subprocess only
where no stack is needed: on two loaded cores each `python -m evoskill` costs seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from typer.testing import CliRunner

from evoskill.cli import app
from evoskill.clients.training import query_progress
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import Settings, without_secrets
from tests.conftest import make_settings
from tests.integration.training_stack import Stack, client_of, wait_for

pytestmark = pytest.mark.integration

TINY = ("--env", "twx:coin", "--epochs", "1", "--episodes-per-epoch", "2", "--eval-episodes", "1", "--simulations",
        "4", "--max-steps", "4", "--train-steps", "2", "--batch-size", "8")


class Cli:
    """The `evoskill` command reading exactly `settings` (as the stack's children do): in-process in a thread,
    or with `subprocess` as `python -m evoskill`."""

    def __init__(self, settings: Settings, folder: Path, subprocess: bool = False) -> None:
        data, secrets = without_secrets(settings)
        path = folder / "settings.json"
        path.write_text(json.dumps(data))
        self.unset = [k for k in os.environ if k.startswith("EVOSKILL_")]
        self.env = {**secrets, "EVOSKILL_CONFIG_FILE": str(path), "COLUMNS": "200"}
        self.subprocess = subprocess

    async def __call__(self, *args: str) -> tuple[int, str, str]:
        if not self.subprocess:
            result = await asyncio.to_thread(CliRunner().invoke, app, list(args),
                                             env={**dict.fromkeys(self.unset), **self.env})
            assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
            return result.exit_code, result.stdout, result.stderr
        env = {k: v for k, v in os.environ.items() if k not in self.unset} | self.env
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "evoskill", *args, env=env, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 180)
        assert b"Traceback" not in out + err, (out + err).decode()
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()


async def test_detached_runs_are_paused_shown_listed_resumed_attached_and_cancelled(stack: Stack,
                                                                                   tmp_path: Path) -> None:
    cli = Cli(stack.settings, tmp_path)
    run_id, doomed = f"train-{uuid.uuid4().hex[:8]}", f"train-{uuid.uuid4().hex[:8]}"
    await stack.stop_worker()
    try:
        code, out, _ = await cli("train", "--detach", "--workflow-id", run_id, *TINY)
        assert code == 0 and out.strip() == run_id  # the id alone on stdout, for RUN=$(evoskill train --detach …)
        code, out, _ = await cli("train", "--detach", "--workflow-id", doomed, *TINY)
        assert code == 0
        code, _, err = await cli("train", "--detach", "--workflow-id", run_id, *TINY)
        assert code == 2 and f"--workflow-id {run_id!r} is taken" in err

        assert (await cli("runs", "pause", run_id))[0] == 0
        code, out, _ = await cli("runs", "stop", "--now", doomed)
        assert code == 0 and "cancel requested" in out
        # No worker: the parameters still show (from the start event), the progress says why it is missing.
        code, out, _ = await cli("runs", "show", run_id)
        assert code == 0 and "twx:coin" in out and "episodes_per_epoch" in out
        assert "no orchestrator worker answered" in out
    finally:
        await stack.start_worker()

    client = await client_of(stack.settings)
    handle = client.get_workflow_handle_for(TrainingWorkflow.run, run_id)
    paused = await wait_for(handle, lambda p: p.paused and p.phase == "playing", what="the paused epoch")
    assert paused.episodes_played == 0 and paused.in_flight == 0  # the pause came before any episode
    cancelled = client.get_workflow_handle(doomed)
    with pytest.raises(WorkflowFailureError):  # the cancel, processed by the worker's first task of that run
        await cancelled.result()
    assert (await cancelled.describe()).status is WorkflowExecutionStatus.CANCELED
    code, out, _ = await cli("runs", "list")
    assert code == 0
    row = {name: next(line for line in out.splitlines() if name in line) for name in (run_id, doomed)}
    assert "running (paused)" in row[run_id] and "0 of 0–0 (playing)" in row[run_id]
    assert "canceled" in row[doomed]

    assert (await cli("runs", "resume", run_id))[0] == 0
    code, out, _ = await cli("runs", "attach", run_id, "--report-dir", str(tmp_path / "report"))
    assert code == 0 and "finished" in out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["epochs_completed"] == 1 and report["episodes_played"] == 2
    assert report["params"]["envs"] == ["twx:coin"]
    # what ran beside what it did: the settings the command followed the run with, versions, git revision
    assert report["run"]["settings"]["temporal"]["task_queue"] == stack.settings.temporal.task_queue
    assert {"evoskill", "git_revision", "libraries"} <= set(report["run"])
    progress = await query_progress(handle)
    assert progress is not None and progress.phase == "done"

    # Mistakes: one line each, exit 1 for a run that has ended, 2 for an id that names none.
    code, _, err = await cli("runs", "pause", run_id)
    assert code == 1 and err.strip() == f"error: run {run_id} is completed: only a running run can be paused"
    code, _, err = await cli("runs", "show", "train-nosuchrun")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no training run 'train-nosuchrun'" in err


async def test_without_a_stack_runs_and_detach_say_so_in_one_line(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)  # nothing listens on its ports
    cli = Cli(settings, tmp_path, subprocess=True)  # the console entry point: no traceback
    code, _, err = await cli("runs", "list")
    assert code == 1 and f"no Temporal answers at {settings.temporal_address}" in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = await cli("train", "--detach", *TINY)
    assert code == 1 and "--detach needs a running stack" in err and len(err.strip().splitlines()) == 1
