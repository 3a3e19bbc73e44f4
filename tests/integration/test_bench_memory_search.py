"""`evoskill bench memory-search`'s whole path on CoinCollector, tiny: four stacks (two seeds, memory off and on)
brought up, the same games played on each pair, the summary and its JSON. Minutes: slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoskill.bench.memory_search import run_memory_search_bench
from evoskill.bench.outer_loop import EvalArgs
from evoskill.core.agent import AgentKind

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]


def test_the_same_games_with_memory_off_and_on(tmp_path: Path) -> None:
    out = tmp_path / "memory-search.json"
    result = run_memory_search_bench(EvalArgs("twx:coin", 2, 4, 1), AgentKind.MCTS, 2, [0, 1], tmp_path / "work", out,
                                     {"EVOSKILL_MEMORY__FEATURIZER": "hash"}, rounds=2)
    written = json.loads(out.read_text())
    assert written.pop("run")["git_revision"] and written == result
    assert [(r["seed"], r["memory"]) for r in result["runs"]] == [(0, "off"), (0, "on"), (1, "off"), (1, "on")]
    for r in result["runs"]:
        assert len(r["games_won"]) == 4 and min(r["games_env_steps"]) > 0 and not r["failed_episodes"]
    # Each seed's pair played the same games, in each round: seed 1 starts where seed 0's games end.
    for r in result["runs"]:
        folder = tmp_path / "work" / f"seed-{r['seed']}" / f"memory-{r['memory']}"
        for round_ in (0, 1):
            games = json.loads((folder / f"eval-round-{round_}.json").read_text())["seeds"]
            assert games == ([0, 1] if r["seed"] == 0 else [2, 3])
    assert result["rounds"] == 2 and result["late_games"] == "the last round"
    on = json.loads((tmp_path / "work" / "seed-0" / "memory-on" / "eval-round-1.json").read_text())
    assert on["settings"]["search"]["memory_weight"] > 0
