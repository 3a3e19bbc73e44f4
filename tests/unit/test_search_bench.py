"""The planner benchmark: same problem, same answers, figures written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evoskill.bench import bench_app, mctx_baseline
from evoskill.bench.planner import SyntheticProblem, measure_evoskill, measure_mctx, measure_naive

PROBLEM = SyntheticProblem(branching=4, depth=5)


def test_evoskill_and_naive_build_the_same_tree() -> None:
    ours = measure_evoskill(PROBLEM, 120, repeats=1)
    naive = measure_naive(PROBLEM, 120, repeats=1)
    np.testing.assert_array_equal(ours.root_visits, naive.root_visits)
    assert ours.root_visits.sum() == 120
    assert ours.sims_per_second > 0 and naive.sims_per_second > 0


@pytest.mark.slow  # a JAX compile: pytest -m slow tests/unit/test_search_bench.py
def test_mctx_builds_the_same_tree() -> None:
    pytest.importorskip("mctx")
    ours = measure_evoskill(PROBLEM, 60, repeats=1)
    theirs = measure_mctx(PROBLEM, 60, repeats=1)
    assert theirs is not None
    np.testing.assert_array_equal(theirs.root_visits, ours.root_visits)


def test_bench_command_writes_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mctx_baseline, "available", lambda: False)  # keep it fast: no JAX compile
    out = tmp_path / "planner.json"
    args = ["planner", "--json", str(out), "--simulations", "50", "--branching", "4", "--depth", "4", "--repeats", "1"]
    result = CliRunner().invoke(bench_app, args)
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert set(figures) == {"evoskill", "naive", "mctx"}
    assert figures["mctx"] is None
    assert figures["evoskill"] > 0 and figures["naive"] > 0
    assert "sims/s" in result.output
