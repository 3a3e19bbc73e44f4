"""`evoskill eval --json` through the CLI records what was run (budget, seeds, the settings as used, versions,
git revision), and each row's episode id and trace id lead to `evoskill trace`: real planner, sandbox and
reward services over gRPC."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest

from evoskill.platform.config import Settings, without_secrets
from evoskill.platform.telemetry import package_version
from evoskill.platform.trace_file import OtlpJsonFileExporter
from tests.integration.test_runs_cli import Cli

pytestmark = pytest.mark.integration


async def test_an_eval_report_says_what_ran_and_each_row_leads_to_its_trace(
        services: Settings, spans, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings = services.model_copy(update={"telemetry": services.telemetry.model_copy(update={"trace_dir": "traces"})})
    cli = Cli(settings, tmp_path)
    spans.clear()
    out = tmp_path / "new folder" / "eval.json"
    code, stdout, stderr = await cli("eval", "--env", "twx:coin", "--agent", "random", "--episodes", "2",
                                     "--simulations", "4", "--max-steps", "3", "--seed-offset", "5",
                                     "--json", str(out))
    assert code == 0, stdout + stderr
    report = json.loads(out.read_text())
    assert report["budget"] == {"episodes": 2, "simulations": 4, "max_steps": 3, "parallel": 1}
    assert report["seeds"] == [5, 6] and [e["seed"] for e in report["episodes"]] == [5, 6]
    run = report["run"]
    assert run["evoskill"] == package_version() and "torch" in run["libraries"]
    assert re.fullmatch(r"([0-9a-f]{40}(\+dirty)?)?", run["git_revision"])  # "" outside a git checkout
    # the settings as the command used them, not the defaults it overrode
    assert run["settings"]["search"]["num_simulations"] == 4 and run["settings"]["search"]["max_episode_steps"] == 3
    assert run["settings"]["planner_endpoint"]["port"] == settings.endpoint("planner").port

    played = {s.attributes["evoskill.episode_id"]: s for s in spans.get_finished_spans() if s.name == "planner.episode"}
    for episode in report["episodes"]:
        assert re.fullmatch(rf"eval-[0-9a-f]{{8}}-{episode['seed']}", episode["episode_id"])
        assert episode["trace_id"] == format(played[episode["episode_id"]].context.trace_id, "032x")

    # A row of the report to its trace: the span files the stack writes with telemetry.trace_dir, then the CLI.
    exporter = OtlpJsonFileExporter(settings.state_dir / "traces", "planner")
    exporter.export(spans.get_finished_spans())
    exporter.shutdown()
    first = report["episodes"][0]
    code, stdout, stderr = await cli("trace", "--episode", first["episode_id"])
    assert code == 0, stdout + stderr
    assert f"trace {first['trace_id']}" in stdout and "planner.episode" in stdout


def ctrl_c_reaches_it() -> None:
    """In the child before exec: SIGINT's default disposition, as a terminal's foreground command has. A test run
    in a background job (`make test &`) ignores SIGINT, the child inherits that, and Python keeps an inherited
    SIG_IGN, so the Ctrl-C below would go unheard."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_an_interrupted_eval_keeps_the_episodes_already_played(
        services: Settings, spans, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data, secrets = without_secrets(services)
    (tmp_path / "settings.json").write_text(json.dumps(data))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EVOSKILL_")}, **secrets,
           "EVOSKILL_CONFIG_FILE": str(tmp_path / "settings.json")}
    out = tmp_path / "eval.json"
    spans.clear()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "evoskill", "eval", "--env", "twx:coin", "--agent", "random", "--episodes", "500",
        "--max-steps", "2", "--json", str(out), env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, preexec_fn=ctrl_c_reaches_it)
    # Two episodes ended in the planner: one at least is in the command's hands (it plays one at a time).
    for _ in range(1200):
        if sum(s.name == "planner.episode" for s in spans.get_finished_spans()) >= 2 or process.returncode is not None:
            break
        await asyncio.sleep(0.1)
    process.send_signal(signal.SIGINT)  # Ctrl-C
    stdout, stderr = await asyncio.wait_for(process.communicate(), 180)
    assert process.returncode == 130, (stdout + stderr).decode()
    assert b"Traceback" not in stdout + stderr
    assert f"interrupted: the episodes played so far are in {out}" in stderr.decode()
    report = json.loads(out.read_text())
    assert report["interrupted"] and 1 <= len(report["episodes"]) < 500 and len(report["seeds"]) == 500
    assert [e["seed"] for e in report["episodes"]] == list(range(len(report["episodes"])))
