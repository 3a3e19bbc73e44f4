"""`evoskill eval --env bfcl:multi_turn_base` end to end: the CLI, the planner, the sandbox's workers running BFCL's
API simulations and the reward service; the demo agent's gold paths (train entries) are accepted by BFCL's
checker, and the random agent's episodes are scored by it too."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evoskill.platform.config import Settings
from tests.integration.test_runs_cli import Cli

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                 reason="bfcl-eval is not installed (make install installs it: --no-deps)")]


async def test_eval_plays_bfcl_entries_through_the_services(services: Settings, tmp_path: Path) -> None:
    cli = Cli(services, tmp_path)
    out = tmp_path / "demo.json"
    code, stdout, stderr = await cli("eval", "--env", "bfcl:multi_turn_base", "--agent", "demo", "--fold", "train",
                                     "--episodes", "2", "--max-steps", "60", "--json", str(out))
    assert code == 0, stdout + stderr
    report = json.loads(out.read_text())
    assert report["success_rate"] == 1.0 and report["mean_score"] == 1.0 and report["errors"] == 0

    out = tmp_path / "random.json"
    code, stdout, stderr = await cli("eval", "--env", "bfcl:multi_turn_base", "--agent", "random", "--episodes", "2",
                                     "--max-steps", "12", "--json", str(out))
    assert code == 0, stdout + stderr
    report = json.loads(out.read_text())
    assert report["errors"] == 0 and len(report["episodes"]) == 2
    assert all(0.0 <= e["score"] <= 1.0 for e in report["episodes"])
