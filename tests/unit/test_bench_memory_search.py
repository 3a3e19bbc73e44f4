"""The memory-search benchmark's figures from eval reports: per run, and memory on against off."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoskill.bench.memory_search import Games, check_library, summary
from evoskill.bench.outer_loop import EvalArgs
from evoskill.core.agent import AgentKind


def report(won: list[bool], env_steps: list[int]) -> dict[str, object]:
    # Out of order, as a parallel eval may list them: the figures follow the seeds.
    episodes = [{"seed": s, "won": w, "env_steps": n, "error": ""}
                for s, (w, n) in enumerate(zip(won, env_steps, strict=True))]
    return {"episodes": episodes[::-1]}


def test_a_runs_figures_follow_the_games_in_the_order_played() -> None:
    games = Games.of(report([False, False, True, True], [400, 300, 200, 100]))
    assert games.won == [False, False, True, True]
    figures = games.figures()
    assert figures["success"] == 0.5 and figures["env_steps"] == 250
    assert figures["env_steps_per_win"] == 500  # 1000 steps for 2 wins
    assert figures["late_success"] == 1.0 and figures["late_env_steps"] == 150


def test_with_rounds_the_late_games_are_the_last_round() -> None:
    games = Games.of(report([False, True], [50, 60]), report([True, True], [10, 20]))
    assert games.won == [False, True, True, True] and games.env_steps == [50, 60, 10, 20]
    figures = games.figures()
    assert figures["success"] == 0.75 and figures["late_success"] == 1.0 and figures["late_env_steps"] == 15


def test_a_run_that_won_nothing_has_all_its_steps_per_win() -> None:
    assert Games.of(report([False, False], [10, 30])).figures()["env_steps_per_win"] == 40


def test_the_summary_sets_memory_on_against_off() -> None:
    runs = []
    for seed, (off, on) in enumerate([((0.5, 300), (0.75, 150)), ((0.5, 500), (0.75, 250))]):
        for mode, (success, steps) in (("off", off), ("on", on)):
            runs.append({"seed": seed, "memory": mode, "success": success, "env_steps": steps,
                         "env_steps_per_win": steps / success, "late_success": success, "late_env_steps": steps})
    result = summary(EvalArgs("twx:coin", 4, 30, 1), AgentKind.MCTS, 8, runs, {})
    assert result["rows"]["off"]["env_steps_mean"] == 400 and result["rows"]["on"]["env_steps_sd"] > 0
    assert result["ratios"]["env_steps_on_over_off"] == pytest.approx(0.5)
    assert result["differences"]["success_on_minus_off"] == pytest.approx(0.25)
    assert result["seeds"] == [0, 1] and result["agent"] == "mcts"


@pytest.mark.parametrize(("agent", "library", "problem"), [
    (AgentKind.POLICY_MCTS, None, "needs --library"), (AgentKind.POLICY, None, "needs --library"),
    (AgentKind.MCTS, "lib.jsonl", "plays no θ"), (AgentKind.MCTS, None, ""), (AgentKind.POLICY_MCTS, "lib.jsonl", ""),
])
def test_theta_is_cloned_from_a_library_for_the_agents_that_play_it_only(agent: AgentKind, library: str | None,
                                                                           problem: str) -> None:
    if problem:
        with pytest.raises(ValueError, match=problem):
            check_library(agent, Path(library) if library else None)
    else:
        check_library(agent, Path(library) if library else None)
