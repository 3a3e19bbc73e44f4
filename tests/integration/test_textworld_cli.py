"""TextWorld from the CLI as a new user runs it: `evoskill eval --env 'tw:tw-coin_collector?level=1'` in a fresh
folder, with the default relative state folder (`make run`'s `.evoskill`), on the embedded stack the command
brings up. tw-make runs in a temporary working directory: its games must land in the state folder's cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.integration.test_stack import env_of

pytestmark = pytest.mark.integration


def test_eval_plays_textworld_from_a_fresh_state_folder(tmp_path: Path) -> None:
    fresh = tmp_path / "checkout"
    fresh.mkdir()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EVOSKILL_")},
           **env_of(make_settings(tmp_path / "unused")), "EVOSKILL_STATE_DIR": ".evoskill"}
    played = subprocess.run(
        [sys.executable, "-m", "evoskill", "eval", "--env", "tw:tw-coin_collector?level=1", "--episodes", "3",
         "--simulations", "4", "--max-steps", "10", "--json", "coin.json"],
        cwd=fresh, env=env, capture_output=True, text=True, timeout=900)
    assert played.returncode == 0, played.stdout + played.stderr
    assert "Traceback" not in played.stdout + played.stderr
    report = json.loads((fresh / "coin.json").read_text())
    assert report["errors"] == 0 and len(report["episodes"]) == 3
    assert all(e["steps"] > 0 for e in report["episodes"])
    games = list((fresh / ".evoskill" / "cache" / "textworld").rglob("*.z8"))
    assert games, "tw-make's games are not in the state folder's cache"
