"""The memory benchmark at a tiny size through the CLI: exact search finds the true top 10, the JSON has its
fields; and its arithmetic (tie-aware recall, ratios)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evoskill.bench import bench_app
from evoskill.bench.memory import Row, edge_available, experiences, ratios, recall_at_k


def test_bench_memory_at_200_experiences_is_exact_and_writes_its_fields(tmp_path: Path) -> None:
    out = tmp_path / "bench-memory.json"
    result = CliRunner().invoke(bench_app, ["memory", "--sizes", "100,200", "--queries", "12", "--json", str(out),
                                            "--work-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    why_no_edge = edge_available()
    engines = {"qdrant-local"} | (set() if why_no_edge else {"qdrant-edge"})
    assert {(r["size"], r["engine"]) for r in summary["rows"]} == {(s, e) for s in (100, 200) for e in engines}
    for row in summary["rows"]:
        assert row["recall_at_10"] == 1.0  # local mode is brute force; Edge is plain (exact) below its threshold
        assert row["writes_per_s"] > 0 and 0 < row["retrieve_p50_ms"] <= row["retrieve_p99_ms"]
    assert {"code_path", "featurizer", "queries", "edge", "machine", "ratios", "run"} <= summary.keys()
    assert summary["edge"] == "measured" or "not installed" in summary["edge"]
    assert list(tmp_path.glob("bench-memory-*")) == []  # the temporary stores are removed


def test_bad_sizes_are_exit_2() -> None:
    result = CliRunner().invoke(bench_app, ["memory", "--sizes", "200,100"])
    assert result.exit_code == 2 and "increasing" in result.output


def test_recall_counts_ties_with_the_tenth_as_hits() -> None:
    exact = np.array([0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.1, 0.0])
    assert recall_at_k(list(range(10)), exact) == 1.0
    assert recall_at_k([*range(9), 10], exact) == 1.0  # row 10 ties the true 10th
    assert recall_at_k([*range(9), 11], exact) == pytest.approx(0.9)


def test_experiences_are_deterministic_and_keyed_by_index() -> None:
    a, b = experiences(0, 45), experiences(0, 45)
    assert a == b and [e.step_index + 20 * int(e.episode_id.rsplit("-", 1)[1]) for e in a] == list(range(45))


def test_ratios_compare_edge_with_local_per_size() -> None:
    rows = [Row(10, "qdrant-local", 100.0, 4.0, 8.0, 1.0, 2.0), Row(10, "qdrant-edge", 400.0, 1.0, 2.0, 1.0, 0.5)]
    assert ratios(rows) == [{"size": 10, "edge_writes_x": 4.0, "edge_p50_speedup_x": 4.0, "edge_p99_speedup_x": 4.0}]
