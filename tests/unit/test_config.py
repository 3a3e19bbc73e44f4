"""Configuration: env overrides, config files, and the one listing of every setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoskill.core.errors import InvalidInput
from evoskill.platform.config import Settings, describe


def test_environment_overrides_nested_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_NATS__URL", "nats://nats.example:4222")
    monkeypatch.setenv("EVOSKILL_SEARCH__C_PUCT", "2.0")
    monkeypatch.setenv("EVOSKILL_PLANNER_ENDPOINT__PORT", "6000")
    s = Settings()
    assert s.nats_url == "nats://nats.example:4222"
    assert s.search.c_puct == 2.0
    assert s.endpoint("planner").target == "127.0.0.1:6000"


def test_config_file_is_read_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "evoskill.yaml"
    path.write_text("temporal:\n  address: temporal.example:7233\nsearch:\n  num_simulations: 500\n")
    monkeypatch.setenv("EVOSKILL_CONFIG_FILE", str(path))
    monkeypatch.setenv("EVOSKILL_SEARCH__NUM_SIMULATIONS", "100")
    s = Settings()
    assert s.temporal_address == "temporal.example:7233"
    assert s.search.num_simulations == 100


def test_missing_config_file_names_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_CONFIG_FILE", "/nonexistent/evoskill.yaml")
    with pytest.raises(FileNotFoundError, match=r"nonexistent/evoskill\.yaml"):
        Settings()


def test_every_setting_is_listed_with_a_meaning() -> None:
    rows = describe()
    names = {name for name, _, _ in rows}
    expected = {"nats.url", "temporal.address", "qdrant.url", "search.c_puct", "learner.lr", "planner_endpoint.port"}
    assert expected <= names
    assert all(meaning for _, _, meaning in rows), [name for name, _, meaning in rows if not meaning]


def test_unknown_service_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput, match="unknown service 'plannr'"):
        Settings().endpoint("plannr")
