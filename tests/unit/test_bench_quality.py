"""The quality benchmark's suites, its --set overrides and its summary (the table, mean ± sd, the budget)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from evoskill.bench.outer_loop import AgentRow
from evoskill.bench.quality import GAME_CACHE_VAR, quality_summary, setting_overrides, shared_game_cache, show_quality
from evoskill.bench.suites import SCIENCEWORLD_TASKS, SUITES, resolve, with_budget
from evoskill.envs import parse_spec
from evoskill.envs.scienceworld_env import scienceworld_available
from tests.library_lines import library_episode, write_library


def test_the_issue_suites_are_there_with_their_protocols() -> None:
    assert {"cooking-easy", "cooking-hard", "coin", "simonsays", "peckingorder", "tw-treasure-hunter",
            "tw-simple"} | {f"scienceworld-{t}" for t in SCIENCEWORLD_TASKS} == set(SUITES)
    assert "numIngredients=2" in SUITES["cooking-easy"].env and SUITES["cooking-hard"].env == "twx:cookingworld"
    boil, find = SUITES["scienceworld-boil"], SUITES["scienceworld-find-animal"]
    assert (boil.budget.library_episodes, boil.budget.test_episodes, boil.budget.max_steps) == (5, 20, 100)
    assert find.budget.max_steps == 30 and find.env == "sciworld:find-animal?easy=1"
    # thousands of candidates a step: no children stepped for marks; a --set of the same setting wins
    assert setting_overrides([*find.settings, "search.prefetch_children=4"]) == {
        "EVOSKILL_SEARCH__PREFETCH_CHILDREN": "4", "EVOSKILL_SEARCH__TIME_BUDGET_S": "5.0"}
    assert setting_overrides(list(find.settings))
    for suite in SUITES.values():
        assert suite.quick.wall_time_s < suite.budget.wall_time_s
        if not suite.env.startswith("sciworld:") or scienceworld_available():
            parse_spec(suite.env)
    assert resolve("coin", "twx:simonsays").env == "twx:simonsays"  # the suite's protocol on another env
    assert resolve(None, "twx:arithmetic").budget == SUITES["coin"].budget
    # --env alone takes its family's protocol: a ScienceWorld task outside the suite gets EMPO²'s (its fold of
    # five train games, 20 test games, its step cap and search settings), a TextWorld game the TextWorld suites'
    other = resolve(None, "scienceworld:find-living-thing?easy=1")
    assert (other.env, other.budget.train_fold_size, other.budget.test_episodes, other.budget.max_steps) == (
        "scienceworld:find-living-thing?easy=1", 5, 20, 30)
    assert other.settings == find.settings and other.note == find.note
    assert resolve(None, "sciworld:chemistry-mix-paint-secondary-color").budget.max_steps == 30
    assert resolve(None, "sw:grow-plant").budget == SUITES["scienceworld-grow-plant"].budget
    assert resolve(None, "tw:tw-coin_collector?level=5").budget == SUITES["tw-simple"].budget
    bfcl = resolve(None, "bfcl:multi_turn_base").budget  # every train entry once, ScienceWorld's 8 simulations
    assert (bfcl.library_episodes, bfcl.max_steps, bfcl.simulations, bfcl.test_episodes) == (120, 40, 8, 20)
    with pytest.raises(ValueError, match="no scheme"):
        resolve(None, "find-living-thing")
    with pytest.raises(ValueError, match="unknown suite 'cooking'; suites: cooking-easy"):
        resolve("cooking", None)


def test_settings_reach_the_stacks_as_environment_variables_once_checked() -> None:
    assert setting_overrides(["learner.lr=0.001", "search.value_mix=0.5"]) == {
        "EVOSKILL_LEARNER__LR": "0.001", "EVOSKILL_SEARCH__VALUE_MIX": "0.5"}
    for bad, why in [("learner.lr", "expected group.name=value"), ("lerner.lr=1", "no settings group 'lerner'"),
                     ("learner.encoderz=x", "learner has no setting 'encoderz'"),
                     ("learner.lr=fast", "valid number")]:
        with pytest.raises(ValueError, match=why):
            setting_overrides([bad])


def test_every_seed_shares_the_callers_game_cache_unless_one_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(GAME_CACHE_VAR, raising=False)
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    assert shared_game_cache({}) == {GAME_CACHE_VAR: str(tmp_path / "state" / "cache")}
    assert shared_game_cache({GAME_CACHE_VAR: "mine"}) == {}
    monkeypatch.setenv(GAME_CACHE_VAR, "theirs")
    assert shared_game_cache({}) == {}


def test_the_summary_gives_mean_and_spread_over_seeds_with_the_budget() -> None:
    suite = SUITES["cooking-easy"]
    rows = [AgentRow("random", 0, [0.0], [0.2], [40.0]), AgentRow("uniform-prior MCTS", 4, [0.1], [0.4], [900.0]),
            AgentRow("θ + MCTS", 4, [0.5, 0.7], [0.8, 0.9], [500.0, 700.0]),
            AgentRow("θ alone", 0, [0.3, 0.5], [0.6, 0.7], [20.0, 30.0])]
    demos = {"episodes": 40, "won": 40, "steps": 520, "seconds": 9.0, "episodes_per_s": 4.4}
    result = quality_summary(suite, True, rows, demos, [{"seed": 0}, {"seed": 1}], {"total_s": 200.0}, {})
    theta = result["agents"][2]
    assert theta["runs"] == 2 and theta["success_mean"] == pytest.approx(0.6)
    assert theta["env_steps_mean"] == pytest.approx(600.0) and theta["env_steps_sd"] == pytest.approx(141.42, 0.01)
    assert result["comparisons"]["theta_search_minus_uniform_success"] == pytest.approx(0.5)
    assert result["comparisons"]["theta_alone_minus_random_score"] == pytest.approx(0.45)
    assert result["within_budget"] and result["seeds"] == [0, 1]
    console = Console(record=True, width=200)
    show_quality(console, result)
    text = console.export_text()
    assert "60% ± 14%" in text and "600 ± 141" in text
    assert "library 40 gold paths, 100 gradient steps; 3 test games ≤ 30 steps, 4 simulations" in text


def test_an_evaluation_counts_its_walks_back_a_game() -> None:
    row = AgentRow("θ alone", 0)
    row.record({"success_rate": 0.0, "mean_score": 0.1, "mean_env_steps": 60.0, "walks_back": 30,
                "episodes": [{}] * 20})
    row.record({"success_rate": 0.5, "mean_score": 0.6, "mean_env_steps": 40.0, "episodes": [{}] * 20})  # older
    result = quality_summary(SUITES["cooking-easy"], True, [row], {}, [{"seed": 0}, {"seed": 1}], {}, {})
    assert result["agents"][0]["walks_back"] == [1.5]  # the older report counted none: left out, not a zero
    assert result["agents"][0]["walks_back_mean"] == pytest.approx(1.5)


def test_a_budget_change_is_the_budget_that_runs_and_is_recorded() -> None:
    suite = with_budget(resolve("cooking-easy", None), False, ["simulations=8", "library_episodes=300"])
    assert suite.budget.simulations == 8 and suite.budget.library_episodes == 300
    assert suite.to_json(False)["budget"]["simulations"] == 8
    assert with_budget(suite, True, ["wall_time_s=60"]).quick.wall_time_s == 60.0
    assert with_budget(suite, False, ["train_search=puct"]).budget.train_search == "puct"
    online = with_budget(suite, False, ["online_epochs=2"]).budget.train_args("twx:coin", "v000001", 0)
    assert online[online.index("--search-algorithm") + 1] == "gumbel" and "--eval-start" in online
    assert "--fold-size" not in online  # TextWorldExpress: any train seed
    # ScienceWorld's protocol trains on its first 5 variations: the online epochs play those alone
    sw = with_budget(SUITES["scienceworld-find-animal"], False, ["online_epochs=1"]).budget
    args = sw.train_args("sciworld:find-animal?easy=1", "v000001", 0)
    assert args[args.index("--fold-size") + 1] == "5" and int(args[args.index("--episodes-per-epoch") + 1]) <= 5
    assert "5 games (train seeds 0-4)" in sw.describe()
    for bad in (["simulation=8"], ["simulations=x"], ["simulations=-1"], ["simulations"], ["train_search=mcts"]):
        with pytest.raises(ValueError, match="--budget"):
            with_budget(suite, False, bad)


def test_a_shortened_library_is_asked_of_demos_and_said_in_the_budget(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from evoskill.bench import quality

    calls: list[tuple[str, ...]] = []

    def demos(*args: str, env: object = None, log: object = None) -> None:
        calls.append(args)
        (tmp_path / "lib" / "demos.json").write_text(json.dumps(
            {"episodes": 5, "won": 5, "steps": 55, "seconds": 1.0, "episodes_per_s": 5.0}))

    monkeypatch.setattr(quality, "_cli", demos)
    suite = with_budget(resolve("scienceworld-identify-life-stages-1", None), False, ["shorten_library=1"])
    quality.offline_library(Console(file=io.StringIO()), suite, suite.budget, 1, {}, tmp_path / "lib", None)
    assert calls and "--shorten" in calls[0]
    assert "library 5 gold paths, shortened" in suite.budget.describe()
    plain = resolve("scienceworld-identify-life-stages-1", None)
    quality.offline_library(Console(file=io.StringIO()), plain, plain.budget, 1, {}, tmp_path / "lib", None)
    assert "--shorten" not in calls[1]


def test_a_subset_of_the_rows_compares_only_what_it_played(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from evoskill.bench.quality import agent_rows, library_tally

    suite = SUITES["coin"]
    rows = agent_rows(suite.budget, ["policy", "policy+mcts"])
    assert [r.agent for r in rows] == ["θ + MCTS (policy+mcts)", "θ alone (policy)"]
    for bad in ([], ["policy", "theta"]):
        with pytest.raises(ValueError, match="--agents"):
            agent_rows(suite.budget, bad)
    rows[0].record({"success_rate": 1.0, "mean_score": 1.0, "mean_env_steps": 300.0, "mean_steps": 10.0})
    rows[1].record({"success_rate": 0.9, "mean_score": 0.9, "mean_env_steps": 40.0, "mean_steps": 8.0})
    library = tmp_path / "library.jsonl"
    listed = ("take coin", ["take coin", "move east"])
    unlisted = ("pick up seed jar", ["pick up seed plant in seed jar"])
    free = ("get_weather(city=Paris)", [])  # no list at all (an LLM's tool call): not counted
    write_library(library, [library_episode("a", True, [listed, unlisted]),
                            library_episode("b", False, [listed, free])])
    demos = library_tally(library)
    assert (demos["episodes"], demos["won"], demos["steps"], demos["unlisted"]) == (2, 1, 4, 1)
    assert demos["seconds"] == demos["episodes_per_s"] == 0.0  # reused: no time spent, no rate
    result = quality_summary(suite, False, rows, demos, [{"seed": 0}], {"total_s": 1.0}, {})
    assert result["comparisons"] == {}  # no baselines played
    assert [a["env_steps_per_step_mean"] for a in result["agents"]] == [30.0, 5.0]
    console = Console(record=True, width=200)
    show_quality(console, result)
    assert "θ alone (policy)" in console.export_text()


def test_a_scienceworld_summary_gives_the_score_on_its_own_scale() -> None:
    suite = SUITES["scienceworld-find-animal"]
    rows = [AgentRow("θ alone", 0, [0.25], [0.42], [300.0])]
    demos = {"episodes": 5, "won": 5, "steps": 46, "seconds": 9.0, "episodes_per_s": 0.5}
    result = quality_summary(suite, False, rows, demos, [{"seed": 0}], {"total_s": 200.0}, {})
    assert result["agents"][0]["score_scienceworld_mean"] == pytest.approx(42.0)
    console = Console(record=True, width=200)
    show_quality(console, result)
    assert "θ alone 42.0 ± 0.0" in console.export_text()


def test_choose_names_one_setting_and_two_values_or_more() -> None:
    from evoskill.bench.quality import Choice

    choice = Choice.parse("learner.rename_share=0, 0.5")
    assert (choice.setting, choice.variable, choice.values) == ("learner.rename_share",
                                                                "EVOSKILL_LEARNER__RENAME_SHARE", ("0", "0.5"))
    for bad, said in (("learner.rename_share=0.5", "two values or more"), ("rename_share", "two values"),
                      ("learner.nope=1,2", "nope"), ("learner.rename_share=0,many", "rename_share")):
        with pytest.raises(ValueError, match=said):
            Choice.parse(bad)


def test_a_run_of_several_seeds_keeps_the_summary_of_the_seeds_played_so_far(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A ScienceWorld run of three seeds takes hours: stopped in its third, it keeps the first two in its JSON."""
    import contextlib

    from evoskill.bench import quality

    out, seen = tmp_path / "summary.json", list[list[int]]()
    monkeypatch.setattr(quality, "offline_library", lambda *a: (tmp_path / "library.jsonl", {"episodes": 5}))
    monkeypatch.setattr(quality, "stack", lambda *a, **k: contextlib.nullcontext({}))
    monkeypatch.setattr(quality, "play_baseline_rows", lambda *a: None)
    monkeypatch.setattr(quality, "train_theta", lambda env, budget, seed, *a: quality.Trained(f"v{seed}", {}, [], []))

    def evaluate(args, agent, simulations, env, out_path, version, extra):  # type: ignore[no-untyped-def]
        if agent == "policy":  # the seed's last row: what the file holds before its summary is written
            seen.append(json.loads(out.read_text())["seeds"] if out.exists() else [])
        return {"success_rate": 1.0, "mean_score": 0.5, "mean_env_steps": 10.0, "mean_steps": 5.0}

    monkeypatch.setattr(quality, "evaluate", evaluate)
    result = quality.run_quality_bench(SUITES["coin"], False, 3, 1, {}, tmp_path, out, agents=["policy"])
    assert seen == [[], [0], [0, 1]]  # each seed's summary written as it ended, before the next seed played
    assert result["seeds"] == [0, 1, 2] and json.loads(out.read_text())["seeds"] == [0, 1, 2]
    assert [a["runs"] for a in json.loads(out.read_text())["agents"]] == [3]


def test_the_dev_check_scores_theta_on_the_games_it_played_not_on_those_the_services_lost(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from evoskill.bench import quality

    games = [{"score": 0.17, "won": False, "error": ""}] * 8 + [{"score": 0.0, "won": False, "error": "NOT_FOUND"}] * 2
    monkeypatch.setattr(quality, "evaluate", lambda *a, **k: {"mean_score": 0.136, "success_rate": 0.0,
                                                                  "episodes": games})
    budget = SUITES["scienceworld-mendelian-genetics-known-plant"].budget
    check = quality.on_dev_fold("sciworld:mendelian-genetics-known-plant", budget, {}, Path("dev.json"), "v2")
    assert check == {"dev_score": pytest.approx(0.17), "dev_success": 0.0, "dev_episodes": 10, "dev_lost": 2}
    monkeypatch.setattr(quality, "evaluate", lambda *a, **k: {"mean_score": 0.17, "success_rate": 0.0,
                                                                  "episodes": games[:8]})
    assert quality.on_dev_fold("sciworld:x", budget, {}, Path("dev.json"), "v2")["dev_lost"] == 0
