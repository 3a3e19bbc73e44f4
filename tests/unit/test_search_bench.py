"""The planner benchmark: same problem, same answers, figures written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evoskill.bench import bench_app, mctx_baseline
from evoskill.bench.planner import (
    SyntheticProblem,
    compiled_evaluate,
    compiled_step,
    measure_compiled,
    measure_evoskill,
    measure_mctx,
    measure_naive,
)

PROBLEM = SyntheticProblem(branching=4, depth=5)


def test_evoskill_and_naive_build_the_same_tree() -> None:
    ours = measure_evoskill(PROBLEM, 120, repeats=1)
    compiled = measure_compiled(PROBLEM, 120, repeats=1)
    naive = measure_naive(PROBLEM, 120, repeats=1)
    np.testing.assert_array_equal(ours.root_visits, naive.root_visits)
    np.testing.assert_array_equal(compiled.root_visits, naive.root_visits)
    assert ours.root_visits.sum() == 120
    assert ours.sims_per_second > 0 and naive.sims_per_second > 0 and compiled.sims_per_second > 0


def test_compiled_problem_matches_the_python_one() -> None:
    """The numba step/evaluate of the bench compute what the Python callbacks compute."""
    state, env = np.array([5, 0], np.uint64), np.array([PROBLEM.branching, PROBLEM.depth], np.int64)
    nxt = np.zeros(2, np.uint64)
    for action in range(PROBLEM.branching):
        reward, done, num = compiled_step(env, state, action, nxt)
        expected = PROBLEM.step((5, 0), action)
        assert (int(nxt[0]), int(nxt[1])) == expected.state
        assert (reward, done, num) == (expected.reward, expected.done, expected.num_actions)
    states = np.array([[5, 0], [77, 3]], np.uint64)
    logits, values = np.zeros((2, PROBLEM.branching)), np.zeros(2)
    compiled_evaluate(env, states, logits, values)
    expected_eval = PROBLEM.evaluate([(5, 0), (77, 3)])
    np.testing.assert_array_equal(logits, expected_eval.logits)
    np.testing.assert_array_equal(values, expected_eval.values)


@pytest.mark.slow  # a JAX compile: pytest -m slow tests/unit/test_search_bench.py
def test_mctx_builds_the_same_tree() -> None:
    pytest.importorskip("mctx")
    ours = measure_compiled(PROBLEM, 60, repeats=1)
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
    assert set(figures) == {"evoskill", "evoskill_callbacks", "naive", "mctx", "run"}  # run: what ran (provenance)
    assert figures["mctx"] is None
    assert figures["evoskill"] > 0 and figures["evoskill_callbacks"] > 0 and figures["naive"] > 0
    assert "sims/s" in result.output
