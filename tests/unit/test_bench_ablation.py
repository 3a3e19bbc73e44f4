"""`bench quality --ablate`'s pure parts: the rows' settings, the action diversity, the summary's mean ± sd."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from evoskill.bench import ablation, bench_app
from evoskill.bench.ablation import (
    ABLATIONS,
    FULL,
    AblationRow,
    ablation_summary,
    action_diversity,
    file_digest,
    read_row_records,
    row_overrides,
    run_ablation_bench,
    show_ablation,
)
from evoskill.bench.outer_loop import AgentRow
from evoskill.bench.quality import online_only
from evoskill.bench.suites import SUITES
from evoskill.core.errors import InvalidInput
from evoskill.core.search_config import SearchConfig
from tests.library_lines import library_episode, write_library

ROWS = {a.name: a for a in ABLATIONS}


def test_every_row_is_the_full_system_less_one_part() -> None:
    assert list(ROWS) == ["full system", "no memory", "no exploration", "no offline data", "no curiosity"]
    full = row_overrides(ROWS["full system"], {})
    assert full == {f"EVOSKILL_{k.split('.')[0].upper()}__{k.split('.')[1].upper()}": v for k, v in FULL.items()}
    assert full["EVOSKILL_SEARCH__MEMORY_WEIGHT"] == "1" and full["EVOSKILL_SEARCH__EXPLORE_EPSILON"] == "0.05"
    assert row_overrides(ROWS["no memory"], {}) == full | {"EVOSKILL_SEARCH__MEMORY_WEIGHT": "0"}
    assert row_overrides(ROWS["no exploration"], {}) == full | {
        "EVOSKILL_SEARCH__EXPLORE_EPSILON": "0", "EVOSKILL_SEARCH__NOVELTY_WEIGHT": "0",
        "EVOSKILL_SEARCH__ENTROPY_TRIGGER": "0", "EVOSKILL_SEARCH__DIRICHLET_WEIGHT": "0"}
    assert row_overrides(ROWS["no offline data"], {}) == full and not ROWS["no offline data"].offline
    assert all(a.offline for a in ABLATIONS if a.name != "no offline data")
    # search.curiosity_weight (another branch's learned curiosity) is set only where the code has it
    curiosity = {"EVOSKILL_REWARD__CURIOSITY_WEIGHT": "0"}
    if "curiosity_weight" in SearchConfig.model_fields:
        curiosity["EVOSKILL_SEARCH__CURIOSITY_WEIGHT"] = "0"
    assert row_overrides(ROWS["no curiosity"], {}) == full | curiosity


def test_a_set_changes_the_full_system_but_not_what_a_row_takes_out() -> None:
    mine = {"EVOSKILL_SEARCH__EXPLORE_EPSILON": "0.2", "EVOSKILL_LEARNER__HIDDEN": "32"}
    assert row_overrides(ROWS["full system"], mine)["EVOSKILL_SEARCH__EXPLORE_EPSILON"] == "0.2"
    off = row_overrides(ROWS["no exploration"], mine)
    assert off["EVOSKILL_SEARCH__EXPLORE_EPSILON"] == "0" and off["EVOSKILL_LEARNER__HIDDEN"] == "32"


def test_an_optional_setting_the_code_has_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ablation, "OPTIONAL", frozenset({"search.curiosity_weight", "search.novelty_weight"}))
    assert ablation.known({"search.novelty_weight": "0", "search.curiosity_weight": "0"}) == (
        ["search.novelty_weight=0", "search.curiosity_weight=0"] if "curiosity_weight" in SearchConfig.model_fields
        else ["search.novelty_weight=0"])
    with pytest.raises(ValueError, match="search has no setting 'nonesuch'"):
        row_overrides(replace(ROWS["no memory"], settings={"search.nonesuch": "0"}), {})


def test_action_diversity_counts_distinct_sequences_per_task() -> None:
    def ep(seed: int, *actions: str, error: str = "") -> dict[str, object]:
        return {"seed": seed, "actions": list(actions), "error": error}

    assert action_diversity([]) == 0.0
    assert action_diversity([ep(0, "a", "b"), ep(1, "a", "c"), ep(2, "d")]) == 1.0  # every game its own way
    assert action_diversity([ep(0, "a", "b"), ep(1, "a", "b")]) == 0.5  # two games played alike
    assert action_diversity([ep(0, "a"), ep(0, "b"), ep(1, "a"), ep(1, "a")]) == 1.0  # seeds pooled: 2 ways ÷ 2
    assert action_diversity([ep(0, "a"), ep(0, "b"), ep(0, "a", "b")]) == 3.0
    assert action_diversity([ep(0, "a"), ep(1, error="UNAVAILABLE: gone")]) == 1.0  # a lost episode is no play


def test_online_only_takes_as_many_learner_steps_as_cloning_and_the_online_epochs() -> None:
    budget = SUITES["coin"].budget
    assert (budget.online_epochs, budget.gradient_steps) == (0, 1000) and online_only(budget) == (1, 1000)
    assert online_only(replace(budget, online_epochs=2)) == (2, 600)  # (1000 + 2 × 100) / 2
    assert online_only(replace(budget, gradient_steps=5, online_epochs=3)) == (3, 3)  # (5 + 3 × 1) / 3, up
    args = budget.train_args("twx:coin", "", 0, *online_only(budget))
    assert args[args.index("--epochs") + 1] == "1" and args[args.index("--train-steps") + 1] == "1000"
    assert args[args.index("--policy") + 1] == ""


def report(success: float, score: float, env_steps: float, *paths: tuple[str, ...]) -> dict[str, object]:
    return {"success_rate": success, "mean_score": score, "mean_env_steps": env_steps, "mean_steps": 5.0,
            "episodes": [{"seed": i, "actions": list(p), "error": ""} for i, p in enumerate(paths)]}


def test_the_summary_gives_each_row_mean_and_spread_over_seeds_and_prints_them() -> None:
    suite = SUITES["coin"]
    rows = [AblationRow(a, AgentRow(a.name, suite.budget.simulations)) for a in ABLATIONS]
    for row in rows:
        alike = row.ablation.name == "no exploration"
        row.record(report(1.0, 1.0, 100.0, ("n",), ("n",) if alike else ("s",)))
        row.record(report(0.5, 0.6, 300.0, ("n",), ("e",)))
    result = ablation_summary(suite, False, rows, {"episodes": 3}, [{"seed": 0}, {"seed": 1}], {"total_s": 1.0}, {})
    full, off = result["rows"][0], result["rows"][2]
    assert (full["success"], full["success_mean"]) == ([1.0, 0.5], 0.75)
    assert full["success_sd"] == pytest.approx(0.3536, 1e-3) and full["env_steps_sd"] == pytest.approx(141.42, 1e-3)
    assert (full["score_mean"], full["env_steps_mean"]) == (pytest.approx(0.8), 200.0)
    assert (full["diversity"], full["diversity_mean"], full["diversity_over_seeds"]) == ([1.0, 1.0], 1.0, 1.5)
    assert (off["diversity"], off["diversity_mean"], off["diversity_over_seeds"]) == ([0.5, 1.0], 0.75, 1.0)
    assert result["comparisons"]["full_minus_exploration_diversity"] == 0.25
    assert result["comparisons"]["full_minus_memory_success"] == 0.0
    assert off["settings"]["EVOSKILL_SEARCH__DIRICHLET_WEIGHT"] == "0" and result["seeds"] == [0, 1]
    assert result["ablate"] and result["full"] == FULL and full["agent"] == "policy+mcts"
    console = Console(record=True, width=250)
    show_ablation(console, result)
    text = console.export_text()
    assert "no offline data" in text and "75% ± 35%" in text and "0.75 ± 0.35" in text and "100% 50%" in text


def test_a_scienceworld_ablation_gives_each_rows_score_on_its_own_scale() -> None:
    suite = SUITES["scienceworld-find-animal"]
    rows = [AblationRow(a, AgentRow(a.name, suite.budget.simulations)) for a in ABLATIONS]
    for row in rows:
        row.record(report(0.05, 0.775, 229.0, ("look around",)))
    result = ablation_summary(suite, False, rows, {"episodes": 5}, [{"seed": 0}], {"total_s": 1.0}, {})
    assert [r["score_scienceworld_mean"] for r in result["rows"]] == [pytest.approx(77.5)] * len(ABLATIONS)
    console = Console(record=True, width=250)
    show_ablation(console, result)
    assert "full system 77.5 ± 0.0" in console.export_text()
    assert "score_scienceworld_mean" not in ablation_summary(SUITES["coin"], False, rows, {}, [], {}, {})["rows"][0]


def test_the_ablate_switch_runs_the_ablation_bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    called: dict[str, object] = {}

    def fake(suite, quick, seeds, workers, overrides, work_dir, json_path, library, first_seed, rows_from):  # type: ignore[no-untyped-def]
        called.update(suite=suite.name, quick=quick, seeds=seeds, work_dir=work_dir, overrides=overrides)

    monkeypatch.setattr(ablation, "run_ablation_bench", fake)
    result = CliRunner().invoke(bench_app, ["quality", "--suite", "coin", "--quick", "--ablate", "--seeds", "1",
                                            "--set", "learner.hidden=32", "--work-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert called == {"suite": "coin", "quick": True, "seeds": 1, "work_dir": tmp_path.resolve() / "coin-ablate",
                      "overrides": {"EVOSKILL_LEARNER__HIDDEN": "32"}}


def row_record(folder: Path, seed: int, name: str, library: Path, success: float, **changed: object) -> Path:
    """A row record as `run_ablation_bench` writes it, for the coin suite's quick budget and no --set."""
    record = {"seed": seed, "row": name, "suite": SUITES["coin"].to_json(True), "library_digest": file_digest(library),
              "settings": row_overrides(ROWS[name], {}), "revision": "abc123",
              "trained": {"policy_version": "v000001", "losses": {}, "online_epochs": []},
              "report": report(success, success, 50.0, ("go",), (name,)), **changed}
    path = folder / f"seed{seed}-{name.replace(' ', '-')}.json"
    path.write_text(json.dumps(record))
    return path


def test_an_earlier_runs_rows_fill_the_table_without_playing_them(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    library = tmp_path / "library.jsonl"
    write_library(library, [library_episode("a", True, [("go", ["go"])])])
    records = [row_record(tmp_path, 0, a.name, library, 0.5 if a.name == "no memory" else 1.0) for a in ABLATIONS]

    def no_stack(*_: object, **__: object) -> None:
        raise AssertionError("a reused row started a stack")

    monkeypatch.setattr(ablation, "stack", no_stack)
    result = run_ablation_bench(SUITES["coin"], True, 1, 1, {}, tmp_path / "work", tmp_path / "out.json", library,
                                0, records)
    assert [r["success"] for r in result["rows"]] == [[1.0], [0.5], [1.0], [1.0], [1.0]]
    assert result["comparisons"]["full_minus_memory_success"] == 0.5
    assert [(r["seed"], r["row"], r["revision"]) for r in result["reused_rows"]] == [
        (0, a.name, "abc123") for a in ABLATIONS]
    assert json.loads((tmp_path / "out.json").read_text())["reused_rows"][0]["from"] == str(records[0])


def test_a_row_record_that_measured_something_else_is_refused_before_the_library(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    library = tmp_path / "library.jsonl"
    write_library(library, [library_episode("a", True, [("go", ["go"])])])
    other = row_record(tmp_path, 0, "no memory", library, 1.0, settings={"EVOSKILL_SEARCH__MEMORY_WEIGHT": "0"})

    def no_library(*_: object, **__: object) -> None:
        raise AssertionError("the library was made for a run that cannot use its rows")

    monkeypatch.setattr(ablation, "offline_library", no_library)
    with pytest.raises(InvalidInput, match="seed 0, 'no memory' measured something else: its settings"):
        run_ablation_bench(SUITES["coin"], True, 1, 1, {}, tmp_path / "work", None, library, 0, [other])
    with pytest.raises(InvalidInput, match=r"seed 0 is not one of this run's seeds \(1\.\.2"):
        run_ablation_bench(SUITES["coin"], True, 2, 1, {}, tmp_path / "work", None, library, 1,
                           [row_record(tmp_path, 0, "full system", library, 1.0)])
    monkeypatch.undo()
    changed = tmp_path / "changed.jsonl"
    write_library(changed, [library_episode("b", False, [("stay", ["go", "stay"])])])  # another library: another θ
    same = row_record(tmp_path, 0, "no memory", library, 1.0)
    with pytest.raises(InvalidInput, match="cloned θ on another library: its library_digest is 'sha256:"):
        run_ablation_bench(SUITES["coin"], True, 1, 1, {}, tmp_path / "work", None, changed, 0, [same])


def test_what_is_not_a_row_record_is_named(tmp_path: Path) -> None:
    library = tmp_path / "library.jsonl"
    write_library(library, [library_episode("a", True, [("go", ["go"])])])
    junk = tmp_path / "junk.json"
    junk.write_text('{"seed": 0}')
    with pytest.raises(InvalidInput, match=r"junk\.json: not a row record"):
        read_row_records([junk])
    with pytest.raises(InvalidInput, match="no ablation row is named 'no planner'"):
        read_row_records([row_record(tmp_path, 0, "no memory", library, 1.0, row="no planner")])
    twice = row_record(tmp_path, 1, "full system", library, 1.0)
    with pytest.raises(InvalidInput, match="seed 1, 'full system' is given twice"):
        read_row_records([twice, twice])
    assert set(read_row_records([twice])) == {(1, "full system")}
    result = CliRunner().invoke(bench_app, ["quality", "--suite", "coin", "--rows-from", str(twice)])
    assert result.exit_code == 2 and "row records are the ablation's (--ablate)" in result.output
    result = CliRunner().invoke(bench_app, ["quality", "--suite", "coin", "--quick", "--ablate", "--rows-from",
                                            str(junk), "--work-dir", str(tmp_path / "w")])
    assert result.exit_code == 2 and "junk.json: not a row record" in result.output


def test_the_exploration_switches_are_the_settings_they_name_in_every_process(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from evoskill.bench import quality

    called: dict[str, object] = {}
    monkeypatch.setattr(quality, "run_quality_bench", lambda *args, **kwargs: called.update(overrides=args[4]))
    result = CliRunner().invoke(bench_app, ["quality", "--suite", "coin", "--quick", "--memory", "off",
                                            "--entropy-trigger", "0.3", "--explore-epsilon", "0.1", "--curiosity",
                                            "0.2", "--novelty", "0.5", "--work-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert {k: v for k, v in called["overrides"].items() if k.startswith("EVOSKILL_SEARCH")} == {  # type: ignore[attr-defined]
        "EVOSKILL_SEARCH__MEMORY_WEIGHT": "0.0", "EVOSKILL_SEARCH__ENTROPY_TRIGGER": "0.3",
        "EVOSKILL_SEARCH__EXPLORE_EPSILON": "0.1", "EVOSKILL_SEARCH__CURIOSITY_WEIGHT": "0.2",
        "EVOSKILL_SEARCH__NOVELTY_WEIGHT": "0.5"}
    result = CliRunner().invoke(bench_app, ["quality", "--suite", "coin", "--memory", "maybe"])
    assert result.exit_code == 2 and "'--memory'" in result.output
