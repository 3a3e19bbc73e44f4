"""`evoskill bench combine`: several `bench quality` summaries as one table, and the mean over their suites.

Issue 11's ScienceWorld bars are means over ten tasks, each task a suite of its own (`--suite scienceworld-TASK`)
run at its own time, often in pieces (seed 0 first, seeds 1-2 later with `--first-seed 1`). This reads the
committed summaries, merges the pieces of one suite (no agent's seed twice), and takes each agent's mean over the
suites on the suites' own scale (ScienceWorld's 0-100), so the mean in the docs comes from a command. A file named
`PATH#policy,policy+mcts` gives only those agents' rows (θ alone from one run, θ + MCTS from a later one).
With `--family scienceworld` the mean is over the family's ten tasks: a task no file covers, or an agent a task's
files did not run, counts as 0 and is named.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoskill.bench.quality import ROW_LABELS, row_name
from evoskill.bench.suites import SCIENCEWORLD_TASKS
from evoskill.core.agent import AgentKind

FAMILIES: dict[str, tuple[str, ...]] = {"scienceworld": tuple(f"scienceworld-{t}" for t in SCIENCEWORLD_TASKS)}


@dataclass
class SuiteRuns:
    """One suite's figures from one or more summaries: per agent, a score and a success per run."""

    suite: str
    scale: float  # 100 where the suite reports its environment's own scale (ScienceWorld), else 1
    seeds: dict[str, list[int]] = field(default_factory=dict)  # agent -> the training seed of each run
    score: dict[str, list[float]] = field(default_factory=dict)  # agent -> per run, on the suite's scale
    success: dict[str, list[float]] = field(default_factory=dict)
    wall_s: float = 0.0
    files: list[str] = field(default_factory=list)

    def add(self, summary: dict[str, Any], name: str, agents: set[str] | None = None) -> None:
        for row in summary["agents"]:
            agent = row_name(row["agent"])
            if agents is not None and agent not in agents:
                continue
            # θ's rows have a run per training seed; the baselines one, on the first seed's stack
            seeds = summary["seeds"] if len(row["score"]) == len(summary["seeds"]) else summary["seeds"][:1]
            if overlap := set(self.seeds.get(agent, [])) & set(seeds):
                raise ValueError(f"{name}: {agent} of {self.suite} at seeds {sorted(overlap)} is already in "
                                 f"{', '.join(self.files)} (name the agents a file gives: PATH#policy)")
            self.seeds.setdefault(agent, []).extend(seeds)
            self.score.setdefault(agent, []).extend(self.scale * s for s in row["score"])
            self.success.setdefault(agent, []).extend(row["success"])
        self.wall_s += float(summary.get("wall_time_s", {}).get("total_s", 0.0))
        self.files.append(name)


def selected(spec: str) -> tuple[Path, set[str] | None]:
    """`PATH` or `PATH#KIND,KIND` (random, mcts, policy, policy+mcts): the file and the agents taken from it."""
    path, sep, kinds = spec.rpartition("#")
    if not sep:
        return Path(spec), None
    try:
        return Path(path), {row_name(ROW_LABELS[AgentKind(k.strip())]) for k in kinds.split(",")}
    except (ValueError, KeyError):
        raise ValueError(f"{spec}: expected PATH#AGENTS with agents among {', '.join(ROW_LABELS)}") from None


def load(specs: Sequence[str]) -> dict[str, SuiteRuns]:
    """The suites the summaries named by `specs` (`selected`) measured, pieces of one suite merged; ValueError
    naming the file that is not a `bench quality` summary or repeats an agent's seed."""
    suites: dict[str, SuiteRuns] = {}
    for spec in specs:
        path, agents = selected(spec)
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
            name, env = summary["suite"]["name"], summary["env"]
            if not isinstance(summary["seeds"], list) or not isinstance(summary["agents"], list):
                raise TypeError("seeds and agents are not lists")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: not a `bench quality` summary ({type(exc).__name__}: {exc})") from None
        scale = 100.0 if str(env).startswith("sciworld:") else 1.0
        suites.setdefault(name, SuiteRuns(name, scale)).add(summary, spec, agents)
    return suites


def combine(suites: dict[str, SuiteRuns], family: str | None = None) -> dict[str, Any]:
    """Per suite its agents' mean ± sd over runs; per agent the mean over the suites (`family`'s, where given:
    missing ones count as 0) and, where every suite has as many runs, the sd over runs of the per-run means."""
    expected = list(FAMILIES[family]) if family else list(suites)
    if family and (strangers := sorted(set(suites) - set(expected))):
        raise ValueError(f"{', '.join(strangers)}: not among the {family} family's suites")
    agents = list(dict.fromkeys(a for s in suites.values() for a in s.score))
    rows = [{"suite": s.suite, "seeds": s.seeds, "files": s.files, "wall_time_s": s.wall_s,
             "agents": {a: _mean_sd(s.score[a]) | {"success_mean": statistics.fmean(s.success[a]),
                                                   "runs": len(s.score[a])} for a in s.score}}
            for name in expected if (s := suites.get(name))]
    means = {}
    for agent in agents:
        runs = [suites[name].score.get(agent, []) if name in suites else [] for name in expected]
        counted = [statistics.fmean(r) if r else 0.0 for r in runs]
        same = {len(r) for r in runs}
        per_run = ([statistics.fmean(r[i] for r in runs) for i in range(same.pop())]
                   if len(same) == 1 and 0 not in same else [])
        means[agent] = {"score_mean": statistics.fmean(counted),
                        "score_sd": statistics.stdev(per_run) if len(per_run) > 1 else None,
                        "suites_measured": sum(1 for r in runs if r), "suites": len(expected),
                        "counted_as_0": [name for name, r in zip(expected, runs, strict=True) if not r]}
    return {"family": family, "suites": rows, "mean": means,
            "wall_time_s": sum(s.wall_s for s in suites.values()),
            "files": [f for s in suites.values() for f in s.files]}


def _mean_sd(values: list[float]) -> dict[str, float]:
    return {"score_mean": statistics.fmean(values), "score_sd": statistics.stdev(values) if len(values) > 1 else 0.0}
