"""The policy registry: version names, a durable index, newest-only publishing."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoskill.core.errors import InvalidInput, NotFound
from evoskill.learner.registry import PolicyRegistry, parse_version, version_name


def test_version_names_round_trip() -> None:
    assert version_name(3) == "v000003"
    assert [parse_version(v) for v in ("v000003", "3", " v12 ")] == [3, 3, 12]
    for bad in ("", "latest", "v0", "v-1", "policy-v3.onnx"):
        with pytest.raises(InvalidInput, match="not of the form"):
            parse_version(bad)


def test_index_survives_a_new_registry_object_and_only_newer_versions_publish(tmp_path: Path) -> None:
    registry = PolicyRegistry(tmp_path)
    with pytest.raises(NotFound, match="no policy has been published"):
        registry.get("")
    for n in (1, 2):
        (tmp_path / f"policy-v{n:06d}.onnx").write_bytes(b"x" * n)
        registry.add(n, tmp_path / f"policy-v{n:06d}.onnx", {"loss": 1.0 / n})
    reopened = PolicyRegistry(tmp_path)
    assert [e.version for e in reopened.list()] == ["v000001", "v000002"]
    assert reopened.get("").version == "v000002" and reopened.get("1").metrics == {"loss": 1.0}
    assert reopened.path(reopened.get("2")).read_bytes() == b"xx"
    with pytest.raises(ValueError, match="not newer"):
        reopened.add(2, tmp_path / "policy-v000002.onnx", {})
    with pytest.raises(NotFound, match="not published"):
        reopened.get("v000007")


def test_each_version_keeps_what_made_it(tmp_path: Path) -> None:
    registry = PolicyRegistry(tmp_path)
    (tmp_path / "policy-v000001.onnx").write_bytes(b"x")
    run = {"train": {"steps": 4, "seed": 7, "environments": {"twx:coin": 3}}, "git_revision": "abc"}
    registry.add(1, tmp_path / "policy-v000001.onnx", {"loss": 1.0}, "req-1", run)
    assert PolicyRegistry(tmp_path).get("1").run == run
    index = (tmp_path / "index.json").read_text()
    (tmp_path / "index.json").write_text(index.replace('"run"', '"ignored"'))  # an index from before `run`
    assert PolicyRegistry(tmp_path).get("1").run == {}
