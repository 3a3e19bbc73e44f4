"""`evoskill bench quality`'s whole path on CoinCollector with tiny budgets: library, per-seed stacks (import,
clone, one online epoch from the clone, evaluate), baselines, summary and JSON. Minutes: slow."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from evoskill.bench.quality import run_quality_bench
from evoskill.bench.suites import SUITES, Budget

# Two stacks brought up and down, an online epoch on each: past the 300 s default on a loaded 2-core machine.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]


def assert_written(out: Path, result: dict[str, object]) -> None:
    """The JSON holds the summary returned, plus the run record (revision, versions, command) of write_report."""
    written = json.loads(out.read_text())
    assert written.pop("run")["git_revision"] and written == result


def test_the_quick_path_on_coin(tmp_path: Path) -> None:
    tiny = Budget(library_episodes=4, gradient_steps=5, test_episodes=2, max_steps=6, simulations=2, wall_time_s=900,
                  batch_size=8, parallel=2, online_epochs=1, episodes_per_epoch=1, train_simulations=2)
    suite = replace(SUITES["coin"], quick=tiny)
    out = tmp_path / "quality.json"
    result = run_quality_bench(suite, True, 2, 1, {"EVOSKILL_LEARNER__HIDDEN": "32"}, tmp_path / "work", out)
    assert_written(out, result)
    assert result["library"]["episodes"] == 4 and result["library"]["won"] == 4
    # One fresh stack per seed: cloned on the library (v000001), then one online epoch from it (v000002); what
    # serves is keep_best's choice of the two by their held-out games.
    for t in result["trained"]:
        made = [e["policy_version"] for e in t["online_epochs"]]
        assert made[-1] == "v000002" and t["policy_version"] == t["online_epochs"][-1]["serving_version"]
        assert t["policy_version"] in {"v000001", "v000002"}
    runs = {a["agent"]: a["runs"] for a in result["agents"]}
    assert runs == {"random": 1, "uniform-prior MCTS": 1, "θ + MCTS (policy+mcts)": 2, "θ alone (policy)": 2}
    mcts = next(a for a in result["agents"] if a["agent"] == "uniform-prior MCTS")
    assert mcts["env_steps_mean"] > 0 and result["settings"] == {"EVOSKILL_LEARNER__HIDDEN": "32"}
    # each seed's time split: its stack and cloning, then each θ agent's test games, inside the seed's total
    wall = result["wall_time_s"]
    for seed in (0, 1):
        parts = [wall[f"seed_{seed}_{part}_s"] for part in ("train", "policy+mcts", "policy")]
        assert all(x > 0 for x in parts) and sum(parts) <= wall[f"seed_{seed}_s"]


@pytest.mark.timeout(2400)  # five stacks (one a row) brought up and down, and an online epoch
def test_the_quick_ablation_on_coin(tmp_path: Path) -> None:
    from evoskill.bench.ablation import ABLATIONS, run_ablation_bench

    tiny = Budget(library_episodes=4, gradient_steps=5, test_episodes=2, max_steps=6, simulations=2, wall_time_s=900,
                  batch_size=8, parallel=2, episodes_per_epoch=1, train_simulations=2, train_eval_episodes=1)
    suite = replace(SUITES["coin"], quick=tiny)
    out = tmp_path / "ablate.json"
    result = run_ablation_bench(suite, True, 1, 1, {"EVOSKILL_LEARNER__HIDDEN": "32"}, tmp_path / "work", out)
    assert_written(out, result)
    rows = {r["row"]: r for r in result["rows"]}
    assert list(rows) == [a.name for a in ABLATIONS] and all(r["runs"] == 1 for r in rows.values())
    # cloned on the library (v000001) in every row but the one without it: a fresh θ's one online epoch
    versions = {t["row"]: t["policy_version"] for t in result["trained"]}
    assert versions == {a.name: "v000001" for a in ABLATIONS}
    assert [t["online_epochs"] != [] for t in result["trained"]] == [False, False, False, True, False]
    for r in rows.values():
        assert r["env_steps_mean"] > 0 and 0 < r["diversity_mean"] <= 1 and r["failed_episodes"] == 0
        assert r["settings"]["EVOSKILL_LEARNER__HIDDEN"] == "32"
    assert rows["no exploration"]["settings"]["EVOSKILL_SEARCH__EXPLORE_EPSILON"] == "0"
    assert rows["full system"]["settings"]["EVOSKILL_SEARCH__MEMORY_WEIGHT"] == "1"
    # ε varies the games θ learns from; the test games are played without it, in the full system too.
    full = json.loads((tmp_path / "work" / "seed-0" / "full-system" / "eval-policy+mcts.json").read_text())
    assert full["settings"]["search"]["explore_epsilon"] == 0 and result["test_games"] == ["--explore-epsilon", "0"]
    # Each played row is a record an ablation over more seeds takes instead of playing that row again.
    records = [tmp_path / "work" / "seed-0" / a.name.replace(" ", "-") / "row.json" for a in ABLATIONS]
    library = tmp_path / "library.jsonl"
    shutil.copyfile(tmp_path / "work" / "library.jsonl", library)
    again = run_ablation_bench(suite, True, 1, 1, {"EVOSKILL_LEARNER__HIDDEN": "32"}, tmp_path / "work", None,
                               library, 0, records)
    assert [r["success"] for r in again["rows"]] == [r["success"] for r in result["rows"]]
    assert [r["row"] for r in again["reused_rows"]] == [a.name for a in ABLATIONS]


def test_a_setting_chosen_on_the_dev_fold_plays_the_test_games(tmp_path: Path) -> None:
    from evoskill.bench.quality import Choice

    tiny = Budget(library_episodes=4, gradient_steps=5, test_episodes=2, max_steps=6, simulations=2, wall_time_s=900,
                  batch_size=8, parallel=2, train_eval_episodes=2)
    suite = replace(SUITES["coin"], quick=tiny)
    choice = Choice.parse("learner.rename_share=0,0.5")
    result = run_quality_bench(suite, True, 1, 1, {"EVOSKILL_LEARNER__HIDDEN": "32"}, tmp_path / "work",
                               tmp_path / "quality.json", agents=["policy"], choice=choice)
    (trained,) = result["trained"]
    chosen = trained["choice"]
    assert [c["value"] for c in chosen["candidates"]] == ["0", "0.5"]
    assert all(c["dev_episodes"] == 2 and c["policy_version"] == "v000001" for c in chosen["candidates"])
    best = max(chosen["candidates"], key=lambda c: c["dev_score"])
    assert chosen["chosen"] == best["value"] or best["dev_score"] == chosen["candidates"][0]["dev_score"]
    # The dev games were the dev fold's; the test games were played on the chosen value's stack, by its θ.
    folder = tmp_path / "work" / "seed-0" / next(c["folder"] for c in chosen["candidates"]
                                                 if c["value"] == chosen["chosen"])
    dev = json.loads((folder / "eval-dev-policy.json").read_text())
    test = json.loads((folder / "eval-policy.json").read_text())
    assert dev["fold"] == "dev" and test["fold"] == "test" and test["settings"]["policy"] == "v000001"
    assert result["agents"][0]["runs"] == 1


def test_the_cloning_checked_on_the_dev_fold_serves_the_better_theta(tmp_path: Path) -> None:
    """`dev_check_steps`: θ after 3 of 6 cloning steps (v000001) and at the end (v000002) each play the dev games
    alone; the better by dev score (ties: the earlier) plays the test games."""
    tiny = Budget(library_episodes=4, gradient_steps=6, test_episodes=2, max_steps=6, simulations=2, wall_time_s=900,
                  batch_size=8, parallel=2, train_eval_episodes=2, dev_check_steps=3)
    suite = replace(SUITES["coin"], quick=tiny)
    result = run_quality_bench(suite, True, 1, 1, {"EVOSKILL_LEARNER__HIDDEN": "32"}, tmp_path / "work",
                               tmp_path / "quality.json", agents=["policy"])
    (trained,) = result["trained"]
    checks = trained["dev_checks"]
    assert [(c["steps"], c["policy_version"], c["dev_episodes"]) for c in checks] == [(3, "v000001", 2),
                                                                                        (6, "v000002", 2)]
    best = checks[1] if checks[1]["dev_score"] > checks[0]["dev_score"] else checks[0]
    assert trained["policy_version"] == best["policy_version"]
    seed = tmp_path / "work" / "seed-0"
    assert all(json.loads((seed / f"eval-dev-{n}.json").read_text())["fold"] == "dev" for n in (3, 6))
    test = json.loads((seed / "eval-policy.json").read_text())
    assert test["fold"] == "test" and test["settings"]["policy"] == best["policy_version"]
