"""Unit-test fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from evoskill.envs import registry
from evoskill.sandbox.host import EnvHost

EXAMPLE_ENV = Path(__file__).resolve().parents[2] / "examples" / "evoskill-env-example"


@pytest.fixture
def env_entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[EntryPoint]]:
    """The `evoskill.envs` entry points the scheme registry reads, empty as in stale metadata; what a test
    appends before its first spec is declared. The example plug-in's source is importable."""
    points: list[EntryPoint] = []
    monkeypatch.setattr(registry, "entry_points", lambda group: [p for p in points if p.group == group])
    monkeypatch.syspath_prepend(str(EXAMPLE_ENV / "src"))
    registry.scheme_registry.cache_clear()
    yield points
    registry.scheme_registry.cache_clear()


def env_entry_point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name, value, registry.ENTRY_POINT_GROUP)


@pytest.fixture()
def coin() -> Iterator[EnvHost]:
    """A sandbox host on CoinCollector's test game 0, closed after the test."""
    host, _ = EnvHost.open("twx:coin", 0, "test")
    yield host
    host.close()
