"""The outer-loop benchmark's summary: per-agent means over seeds and the issue's comparisons."""

from __future__ import annotations

import pytest
from rich.console import Console

from evoskill.bench.outer_loop import AgentRow, EvalArgs, show, summary


def test_summary_compares_theta_with_the_baselines_over_seeds() -> None:
    rows = [
        AgentRow("random", 0, [0.3], [0.3]),
        AgentRow("uniform-prior MCTS", 4, [0.6], [0.6]),
        AgentRow("uniform-prior MCTS", 12, [0.75], [0.75]),
        AgentRow("θ + MCTS", 4, [0.8, 0.9, 0.7], [0.8, 0.9, 0.7]),
        AgentRow("θ alone", 0, [0.5, 0.6, 0.4], [0.5, 0.6, 0.4]),
    ]
    curves = {0: [1.0, 2.0], 1: [2.0, 1.5], 2: [0.5, 0.9]}
    result = summary(EvalArgs("twx:coin", 20, 50, 2), [0, 1, 2], rows, curves, "--epochs 2")
    c = result["comparisons"]
    assert c["theta_search_minus_uniform_same_sims"] == pytest.approx(0.2)
    assert c["theta_search_minus_uniform_more_sims"] == pytest.approx(0.05)
    assert c["theta_alone_minus_random"] == pytest.approx(0.2)
    assert c["curve_rises_in_seeds"] == 2
    theta = result["agents"][3]
    assert theta["success_mean"] == pytest.approx(0.8) and theta["success_sd"] == pytest.approx(0.1)
    assert result["agents"][0]["success_sd"] == 0.0  # one baseline run: no spread
    console = Console(record=True, width=160)
    show(console, result)
    text = console.export_text()
    assert "80% ± 10%" in text and "in 2 of 3 seeds" in text
