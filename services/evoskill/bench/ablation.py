"""`evoskill bench quality --ablate`: what each part of the system adds (issue 12, item 5).

    evoskill bench quality --suite coin --ablate --seeds 3 --json ablate-coin.json [--quick]

Per training seed and per row, a fresh embedded stack with the row's settings: θ trained as the quality
benchmark trains it (the library imported and cloned, then the budget's online epochs), then θ + MCTS at the
suite's simulations on the same test games. Each row is the full system with one part taken out, so every
process of its stack (reward, planner, learner, the training workflow) runs without that part:

- full system: the suite's defaults with memory and exploration on at `FULL`;
- no memory: memory's advice off (`search.memory_weight = 0`);
- no exploration: ε-greedy, count-based novelty, the entropy trigger and the root's Dirichlet noise off
  (ε acts on the games θ learns from, in every row the test games are played with ε = 0: `TEST_GAMES`);
- no offline data: θ never sees the library: a fresh θ trained by online epochs alone (`quality.online_only`);
- no curiosity: the reward's count-based novelty off (`reward.curiosity_weight = 0`) and search's
  surprise bonus from θ's dynamics model off (`search.curiosity_weight = 0`).

Figures per row: success, score, environment steps and action diversity, per seed and mean ± sd over seeds.

A row takes 10–30 minutes on CookingWorld on 2 cores, so a table of 5 rows × 3 seeds spans runs: each played
row is also written as a row record (`<work dir>/seed-N/<row>/row.json`: its seed, settings, budget, the
library's digest, θ's training and the evaluation's report), and `--rows-from RECORD` (repeatable) puts an
earlier run's rows in this table instead of playing them again, where they measured the same thing (the same
suite budget, row settings and library bytes; anything else is refused, naming what differs). The summary
says which rows were reused and the revision each was played at.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from evoskill.bench.outer_loop import AgentRow, EvalArgs, evaluate, stack
from evoskill.bench.quality import (
    TEST_GAMES,
    offline_library,
    scienceworld_scale,
    setting_overrides,
    shared_game_cache,
    show_scienceworld_scale,
    train_theta,
)
from evoskill.bench.suites import Suite
from evoskill.core.agent import AgentKind
from evoskill.core.errors import InvalidInput
from evoskill.platform.config import Settings
from evoskill.platform.provenance import git_revision, write_report

# The full system: memory's advice at `--memory on`'s weight; ε-greedy at seed 004 §3.2's 5%; novelty at
# memory's curious profile's 0.5; search only where θ is unsure at the measured 0.3 (docs/results.md, "Search
# where θ is unsure"); the root's Dirichlet noise and the reward's curiosity at their defaults (0.25, 0.2); search's
# curiosity from θ's dynamics model at the reward's curiosity weight (0.2).
# A --set of the same setting changes the full system (and every row that does not take that part out).
FULL: dict[str, str] = {
    "search.memory_weight": "1",
    "search.explore_epsilon": "0.05",
    "search.novelty_weight": "0.5",
    "search.entropy_trigger": "0.3",
    "search.dirichlet_weight": "0.25",
    "reward.curiosity_weight": "0.2",
    "search.curiosity_weight": "0.2",
}
# The test games are played without ε-greedy (quality.TEST_GAMES); the search-time parts (novelty, the entropy
# trigger, Dirichlet noise, curiosity, memory) act on them as the row sets them.
# Set only where the running code has them (a report's FULL read back by older code).
OPTIONAL = frozenset({"search.curiosity_weight"})


@dataclass(frozen=True)
class Ablation:
    name: str
    what: str  # what the row changes, as the table says it
    settings: Mapping[str, str] = field(default_factory=dict)  # on top of FULL and --set; they win over both
    offline: bool = True  # θ cloned on the library first


ABLATIONS = (
    Ablation("full system", "memory and exploration on (FULL), θ cloned on the library"),
    Ablation("no memory", "search.memory_weight=0", {"search.memory_weight": "0"}),
    Ablation("no exploration", "ε, novelty, entropy trigger, Dirichlet noise 0",
             {"search.explore_epsilon": "0", "search.novelty_weight": "0", "search.entropy_trigger": "0",
              "search.dirichlet_weight": "0"}),
    Ablation("no offline data", "θ from online epochs alone, no library", offline=False),
    Ablation("no curiosity", "reward.curiosity_weight=0, search.curiosity_weight=0",
             {"reward.curiosity_weight": "0", "search.curiosity_weight": "0"}),
)


def known(pairs: Mapping[str, str]) -> list[str]:
    """`pairs` as `group.name=value`, less the OPTIONAL settings this code does not have."""
    defaults = Settings()
    out = []
    for name, value in pairs.items():
        group, _, setting = name.partition(".")
        model = getattr(defaults, group, None)
        if name in OPTIONAL and (model is None or setting not in type(model).model_fields):
            continue
        out.append(f"{name}={value}")
    return out


def row_overrides(row: Ablation, overrides: Mapping[str, str]) -> dict[str, str]:
    """The environment variables of the row's processes: FULL, then the caller's (--set, the suite's), then
    what the row takes out."""
    return {**setting_overrides(known(FULL)), **overrides, **setting_overrides(known(row.settings))}


def action_diversity(episodes: Iterable[Mapping[str, Any]]) -> float:
    """Distinct action sequences per task (seed 004 §6.1) among played episodes (those the services could not
    finish left out): distinct sequences ÷ distinct tasks (the episodes' seeds). One evaluation plays each
    test game once, so there it is the share of games played in a way no other game was (1 = each its own);
    the seeds' evaluations together give how many ways each game was played, up to the number of seeds."""
    played = [e for e in episodes if not e.get("error")]
    tasks = {e["seed"] for e in played}
    return len({tuple(e.get("actions", ())) for e in played}) / len(tasks) if tasks else 0.0


ROW_RECORD = "row.json"


def file_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def read_row_records(paths: Sequence[Path]) -> dict[tuple[int, str], dict[str, Any]]:
    """Earlier runs' row records by (seed, row); read before the run clears its work dir (a record may lie in
    it). InvalidInput names a file that is not a row record or a (seed, row) given twice."""
    records: dict[tuple[int, str], dict[str, Any]] = {}
    names = {a.name for a in ABLATIONS}
    for path in paths:
        try:
            record = json.loads(path.read_text())
            key = (int(record["seed"]), str(record["row"]))
            _ = record["report"]["episodes"], record["trained"]["policy_version"], record["settings"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidInput(f"--rows-from {path}: not a row record of `bench quality --ablate` ({exc!r})") from None
        if key[1] not in names:
            raise InvalidInput(f"--rows-from {path}: no ablation row is named {key[1]!r} (rows: {sorted(names)})")
        if key in records:
            raise InvalidInput(f"--rows-from {path}: seed {key[0]}, {key[1]!r} is given twice")
        records[key] = {**record, "from": str(path)}
    return records


def record_mismatch(record: Mapping[str, Any], expected: Mapping[str, Any]) -> str | None:
    """What an earlier row record measured differently from the row this run would play (None: the same)."""
    for name, value in expected.items():
        if record.get(name) != value:
            return f"its {name} is {record.get(name)!r}, this run's {value!r}"
    return None


@dataclass
class AblationRow:
    ablation: Ablation
    figures: AgentRow
    diversity: list[float] = field(default_factory=list)  # one per seed
    episodes: list[dict[str, Any]] = field(default_factory=list)  # every seed's, for the diversity over seeds

    def record(self, report: dict[str, Any]) -> None:
        self.figures.record(report)
        self.diversity.append(action_diversity(report.get("episodes", [])))
        self.episodes.extend(report.get("episodes", []))


def run_ablation_bench(suite: Suite, quick: bool, seeds: int, workers: int, overrides: dict[str, str],
                       work_dir: Path, json_path: Path | None, library_from: Path | None = None,
                       first_seed: int = 0, rows_from: Sequence[Path] = ()) -> dict[str, Any]:
    """InvalidInput where a `rows_from` record is unreadable or measured something else than its row here."""
    console = Console() if sys.stdout.isatty() else Console(width=160)
    revision = git_revision()  # read as the stacks start (see run_quality_bench)
    earlier = read_row_records(rows_from)
    for (seed, name), given in earlier.items():  # what can be checked before the library is made
        if not first_seed <= seed < first_seed + seeds:
            raise InvalidInput(f"--rows-from {given['from']}: seed {seed} is not one of this run's seeds "
                               f"({first_seed}..{first_seed + seeds - 1}: --first-seed, --seeds)")
        part = next(a for a in ABLATIONS if a.name == name)
        expected_here = {"suite": suite.to_json(quick), "settings": row_overrides(part, overrides)}
        if (why := record_mismatch(given, expected_here)) is not None:
            raise InvalidInput(f"--rows-from {given['from']}: seed {seed}, {name!r} measured something else: {why}")
    budget = suite.pick(quick)
    args = EvalArgs(suite.env, budget.test_episodes, budget.max_steps, budget.parallel)
    console.print(f"[bold]{suite.name}[/] ({suite.env}){' --quick' if quick else ''} --ablate: {budget.describe()}")
    started = time.perf_counter()
    library, demos = offline_library(console, suite, budget, workers,
                                     {**overrides, **shared_game_cache(overrides)}, work_dir, library_from)
    wall = {"library_s": time.perf_counter() - started}
    rows = [AblationRow(a, AgentRow(a.name, budget.simulations)) for a in ABLATIONS]
    trained: list[dict[str, Any]] = []
    reused: list[dict[str, Any]] = []
    measures = {"suite": suite.to_json(quick), "library_digest": file_digest(library)}
    for (seed, name), given in earlier.items():  # before any row plays
        if (why := record_mismatch(given, {"library_digest": measures["library_digest"]})) is not None:
            raise InvalidInput(f"--rows-from {given['from']}: seed {seed}, {name!r} cloned θ on another library: "
                               f"{why}")
    for seed in range(first_seed, first_seed + seeds):
        seed_started = time.perf_counter()
        for row in rows:
            folder = work_dir / f"seed-{seed}" / row.ablation.name.replace(" ", "-")
            processes = row_overrides(row.ablation, overrides)
            expected = {**measures, "settings": processes}
            record = earlier.get((seed, row.ablation.name))
            if record is not None:  # checked above against `expected`
                reused.append({"seed": seed, "row": row.ablation.name, "revision": record.get("revision"),
                               "from": record["from"]})
            else:
                with stack(folder, {**processes, **shared_game_cache(processes)}) as env:
                    version, losses, online, _ = train_theta(suite.env, budget, seed, library if row.ablation.offline
                                                              else None, env, folder)
                    report = evaluate(args, AgentKind.POLICY_MCTS, budget.simulations, env,
                                      folder / f"eval-{AgentKind.POLICY_MCTS}.json", version, TEST_GAMES)
                record = {"seed": seed, "row": row.ablation.name, **expected, "revision": revision,
                          "trained": {"policy_version": version, "losses": losses, "online_epochs": online},
                          "report": report}
                (folder / ROW_RECORD).write_text(json.dumps(record, indent=1))
            row.record(record["report"])
            trained.append({"seed": seed, "row": row.ablation.name, **record["trained"]})
            console.print(f"seed {seed}, {row.ablation.name}: θ {record['trained']['policy_version']}, success "
                          f"{row.figures.success[-1]:.0%}, diversity {row.diversity[-1]:.2f}"
                          f"{' (reused: ' + record['from'] + ')' if 'from' in record else ''}")
        wall[f"seed_{seed}_s"] = time.perf_counter() - seed_started
    wall["total_s"] = time.perf_counter() - started
    result = {**ablation_summary(suite, quick, rows, demos, trained, wall, overrides), "reused_rows": reused}
    show_ablation(console, result)
    if json_path is not None:
        write_report(json_path, result, Settings())
        console.print(f"wrote {json_path}")
    return result


def ablation_summary(suite: Suite, quick: bool, rows: list[AblationRow], demos: dict[str, Any],
                     trained: list[dict[str, Any]], wall: dict[str, float],
                     overrides: dict[str, str]) -> dict[str, Any]:
    out = []
    for row in rows:
        f = row.figures
        entry: dict[str, Any] = {"row": row.ablation.name, "what": row.ablation.what,
                                 "settings": row_overrides(row.ablation, overrides), "offline": row.ablation.offline,
                                 "agent": str(AgentKind.POLICY_MCTS), "simulations": f.simulations,
                                 "runs": len(f.success), "failed_episodes": sum(f.errors)}
        for name, values in (("success", f.success), ("score", f.score), ("env_steps", f.env_steps),
                             ("diversity", row.diversity)):
            mean, sd = f.mean_sd(values) if values else (0.0, 0.0)
            entry.update({name: values, f"{name}_mean": mean, f"{name}_sd": sd})
        entry["diversity_over_seeds"] = action_diversity(row.episodes)
        entry.update(scienceworld_scale(suite.env, entry))
        out.append(entry)
    full = out[0]
    comparisons = {f"full_minus_{r['row'].removeprefix('no ').replace(' ', '_')}_{figure}":
                   full[f"{figure}_mean"] - r[f"{figure}_mean"]
                   for r in out[1:] for figure in ("success", "score", "env_steps", "diversity")}
    return {"suite": suite.to_json(quick), "env": suite.env, "ablate": True,
            "seeds": sorted({t["seed"] for t in trained}), "settings": overrides, "full": FULL,
            "library": demos, "trained": trained, "rows": out, "wall_time_s": wall, "test_games": list(TEST_GAMES),
            "within_budget": wall.get("total_s", 0.0) <= suite.pick(quick).wall_time_s * len(ABLATIONS),
            "comparisons": comparisons}


def show_ablation(console: Console, result: dict[str, Any]) -> None:
    suite = result["suite"]
    table = Table(title=f"{suite['name']}{' (quick)' if suite['quick'] else ''} ablations: {result['env']}, "
                        f"θ + MCTS on the test fold, seeds {result['seeds']}")
    for column in ("row", "what changes", "runs", "success per seed", "success mean ± sd", "score mean ± sd",
                   "env steps mean ± sd", "action diversity mean ± sd", "diversity over seeds"):
        table.add_column(column)
    for r in result["rows"]:
        table.add_row(r["row"], r["what"], str(r["runs"]), " ".join(f"{s:.0%}" for s in r["success"]),
                      f"{r['success_mean']:.0%} ± {r['success_sd']:.0%}",
                      f"{r['score_mean']:.3f} ± {r['score_sd']:.3f}",
                      f"{r['env_steps_mean']:.0f} ± {r['env_steps_sd']:.0f}",
                      f"{r['diversity_mean']:.2f} ± {r['diversity_sd']:.2f}", f"{r['diversity_over_seeds']:.2f}")
    console.print(table)
    show_scienceworld_scale(console, [(r["row"], r) for r in result["rows"]])
    console.print("full system: " + ", ".join(known(result["full"])) + " (a --set of the same changes it)")
    wall = result["wall_time_s"]
    console.print(f"wall time: {wall.get('total_s', 0.0) / 60:.1f} min (library {wall.get('library_s', 0.0):.0f}s)"
                  f"{'' if result['within_budget'] else ' — over the budget × rows'}; action diversity: distinct "
                  "action sequences ÷ test games (per seed; over seeds: up to the number of seeds)")
