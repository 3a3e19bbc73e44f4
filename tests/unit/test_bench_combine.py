"""`bench combine`: summaries of `bench quality` runs merged per suite, and the mean over a family's suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evoskill.bench.combine import combine, load
from evoskill.cli import app


def summary(tmp_path: Path, name: str, task: str, seeds: list[int], **scores: list[float]) -> str:
    """A `bench quality` summary of the ScienceWorld task's suite: per agent label, its normalised scores."""
    agents = [{"agent": label, "score": values, "success": [0.0] * len(values)} for label, values in scores.items()]
    path = tmp_path / name
    path.write_text(json.dumps({"suite": {"name": f"scienceworld-{task}"}, "env": f"sciworld:{task}?easy=1",
                                "seeds": seeds, "agents": agents, "wall_time_s": {"total_s": 600.0}}))
    return str(path)


def test_pieces_of_a_suite_merge_and_the_family_mean_counts_the_missing_as_zero(tmp_path: Path) -> None:
    files = [summary(tmp_path, "a0.json", "boil", [0], **{"θ alone (policy)": [0.2], "random": [0.0]}),
             summary(tmp_path, "a12.json", "boil", [1, 2], **{"θ alone (policy)": [0.4, 0.6]}),
             summary(tmp_path, "b.json", "find-animal", [0, 1, 2], **{"θ alone (policy)": [0.7, 0.8, 0.9]})]
    result = combine(load(files), "scienceworld")
    boil = next(r for r in result["suites"] if r["suite"] == "scienceworld-boil")
    assert boil["seeds"]["θ alone"] == [0, 1, 2] and boil["agents"]["θ alone"]["score_mean"] == pytest.approx(40.0)
    mean = result["mean"]["θ alone"]
    assert mean["score_mean"] == pytest.approx((40.0 + 80.0) / 10)  # eight tasks not measured: 0
    assert mean["suites_measured"] == 2 and len(mean["counted_as_0"]) == 8 and mean["score_sd"] is None
    assert result["mean"]["random"]["counted_as_0"][0] == "scienceworld-measure-melting-point-known-substance"
    # over the two suites alone, three runs each: the sd over the runs' means (per seed, across the tasks)
    alone = combine(load(files))["mean"]["θ alone"]
    assert alone["score_mean"] == pytest.approx(60.0) and alone["score_sd"] == pytest.approx(15.0)


def test_a_seed_given_twice_is_refused_unless_the_files_give_other_agents(tmp_path: Path) -> None:
    before = summary(tmp_path, "before.json", "boil", [0], **{"θ + MCTS (policy+mcts)": [0.1],
                                                             "θ alone (policy)": [0.2]})
    after = summary(tmp_path, "after.json", "boil", [0], **{"θ + MCTS (policy+mcts)": [0.5]})
    with pytest.raises(ValueError, match="θ \\+ MCTS of scienceworld-boil at seeds \\[0\\] is already in"):
        load([before, after])
    suites = load([f"{before}#policy", after])
    assert suites["scienceworld-boil"].score == {"θ alone": [20.0], "θ + MCTS": [50.0]}
    with pytest.raises(ValueError, match="expected PATH#AGENTS"):
        load([f"{before}#theta"])


def test_the_command_prints_the_mean_and_refuses_what_is_not_a_summary(tmp_path: Path) -> None:
    good = summary(tmp_path, "a.json", "boil", [0], **{"θ alone (policy)": [0.25]})
    out = tmp_path / "mean.json"
    result = CliRunner().invoke(app, ["bench", "combine", good, "--family", "scienceworld", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["mean"]["θ alone"]["score_mean"] == pytest.approx(2.5)
    (tmp_path / "other.json").write_text('{"rows": []}')
    result = CliRunner().invoke(app, ["bench", "combine", str(tmp_path / "other.json")])
    assert result.exit_code == 2 and "not a `bench quality` summary" in result.output
    result = CliRunner().invoke(app, ["bench", "combine", good, "--family", "atari"])
    assert result.exit_code == 2 and "expected one of scienceworld" in result.output
