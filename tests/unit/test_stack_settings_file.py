"""The settings file the supervisor hands its children: each environment's own search settings still apply
wherever nobody set one (ScienceWorld's 5 s of search a step, no child stepped ahead), and what was set wins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evoskill.core.search_config import SearchConfig
from evoskill.envs.registry import search_settings
from evoskill.platform.config import Settings
from evoskill.stack.supervisor import Stack

SCIENCEWORLD = "sciworld:grow-plant?easy=1"


def child_settings(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings a child process of a stack on `settings` reads."""
    env = Stack(settings)._child_env()
    for name in [k for k in os.environ if k.startswith("EVOSKILL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("EVOSKILL_CONFIG_FILE", env["EVOSKILL_CONFIG_FILE"])
    return Settings()


def test_an_environments_search_settings_reach_the_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    child = child_settings(Settings(state_dir=tmp_path), monkeypatch)
    assert child.state_dir == tmp_path.resolve()
    played = search_settings(SCIENCEWORLD, child.search)
    assert played.time_budget_s == 5.0 and played.prefetch_children == 0  # not the defaults, 0 and 32
    assert search_settings("twx:coin", child.search) == SearchConfig()


def test_a_search_setting_someone_set_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(state_dir=tmp_path, search=SearchConfig(time_budget_s=2.0, num_simulations=5))
    played = search_settings(SCIENCEWORLD, child_settings(settings, monkeypatch).search)
    assert (played.time_budget_s, played.num_simulations, played.prefetch_children) == (2.0, 5, 0)
