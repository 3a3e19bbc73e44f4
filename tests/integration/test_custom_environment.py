"""A pip-installed environment plug-in (examples/evoskill-env-example) is a scheme that every process of the
stack can play: installed into a folder on PYTHONPATH (the shared venv stays as it is), listed by `evoskill
envs`, and played by `evoskill eval` through the real CLI on the embedded stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.integration.test_stack import env_of

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "evoskill-env-example"
SPEC = "puzzle:hanoi?disks=3"


def pip_install(tmp_path: Path) -> Path:
    """`pip install` the example, offline, into its own folder; built from a copy so the repo stays clean."""
    source, target = tmp_path / "source", tmp_path / "site-packages"
    shutil.copytree(EXAMPLE, source)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--disable-pip-version-check", "--target", str(target), str(source)],
                   check=True, timeout=300)
    assert (target / "evoskill_env_example-0.1.0.dist-info" / "entry_points.txt").is_file()
    return target


def test_a_pip_installed_environment_is_played_by_evoskill_eval(tmp_path: Path) -> None:
    site = pip_install(tmp_path)
    paths = [str(site), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, **env_of(make_settings(tmp_path / "state")), "PYTHONPATH": os.pathsep.join(paths)}

    def evoskill(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "evoskill", *args], env=env, capture_output=True, text=True,
                              timeout=600)

    listed = evoskill("envs")
    assert listed.returncode == 0 and "puzzle:hanoi" in listed.stdout, listed.stderr

    reports = {}
    for agent in ("random", "demo"):
        played = evoskill("eval", "--env", SPEC, "--agent", agent, "--episodes", "2", "--max-steps", "40",
                          "--json", str(tmp_path / f"{agent}.json"))
        assert played.returncode == 0, played.stdout + played.stderr
        assert "Traceback" not in played.stdout + played.stderr
        reports[agent] = report = json.loads((tmp_path / f"{agent}.json").read_text())
        assert report["env"] == SPEC and report["errors"] == 0 and len(report["episodes"]) == 2
        for episode in report["episodes"]:
            assert episode["steps"] == len(episode["actions"]) > 0
            assert all(a.startswith("move disk ") for a in episode["actions"])
    assert all(e["won"] and e["score"] == 1.0 for e in reports["demo"]["episodes"])  # the gold path wins
