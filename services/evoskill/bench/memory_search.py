"""`evoskill bench memory-search`: does memory make search cheaper on a family of tasks (issue 12)?

    evoskill bench memory-search --env twx:coin --seeds 3 --episodes 10 --rounds 2 --json memory-search.json

Per seed, two fresh embedded stacks play the same games of the family, one after another (`evoskill eval`,
games `seed × episodes` onwards), `rounds` times over (the tasks repeated), with the same agent and
simulations: one with memory's advice off, one with it on (`--memory on`: every real step retrieves
experiences of the games before and tilts the root's priors, docs/memory.md "Fusion"). The memory starts empty
on each stack, so what it knows when a game starts is what the games before left in it: other tasks of the
family in the first round, the same task's earlier attempts after it. Printed side by side: success,
environment steps per game and per won game, the same over the late games (the last round; with one round,
the second half of the games), and the ratios memory on ÷ off.

With `--library FILE` (gold paths, `evoskill demos`), θ is cloned on each stack first, as `bench quality`
clones it (`library import`, `library train --steps N --seed seed+1`: deterministic, so both stacks of a seed
play the same θ), and the agent (`policy` or `policy+mcts`) plays that θ.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from evoskill.bench.outer_loop import EvalArgs, evaluate, stack
from evoskill.bench.quality import train_theta
from evoskill.bench.suites import Budget
from evoskill.core.agent import AgentKind
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

MODES = ("off", "on")


@dataclass(frozen=True)
class Games:
    """The figures of one run of games, in the order played."""

    won: list[bool]
    env_steps: list[int]
    failed: int
    late_from: int  # the index of the first late game: the last round's first, or half of one round's

    @classmethod
    def of(cls, *reports: dict[str, Any]) -> Games:
        """The games of `reports`, one a round, in the order played."""
        episodes = [e for r in reports for e in sorted(r.get("episodes", []), key=lambda e: e["seed"])]
        last = len(reports[-1].get("episodes", [])) if reports else 0
        late_from = len(episodes) - last if len(reports) > 1 else len(episodes) // 2
        return cls([bool(e["won"]) for e in episodes], [int(e["env_steps"]) for e in episodes],
                   sum(bool(e.get("error")) for e in episodes), late_from)

    def figures(self) -> dict[str, float]:
        return {"success": _mean(self.won), "env_steps": _mean(self.env_steps),
                "env_steps_per_win": sum(self.env_steps) / max(sum(self.won), 1),
                "late_success": _mean(self.won[self.late_from:]),
                "late_env_steps": _mean(self.env_steps[self.late_from:])}


def _mean(values: list[Any]) -> float:
    return statistics.fmean(values) if values else 0.0


def check_library(agent: AgentKind, library: Path | None) -> None:
    """θ is cloned from a library for the agents that play it, and for them only: ValueError otherwise."""
    if (library is not None) != agent.uses_policy:
        raise ValueError(f"--agent {agent} {'needs' if agent.uses_policy else 'plays no θ: drop'} --library")


def run_memory_search_bench(args: EvalArgs, agent: AgentKind, simulations: int, seeds: list[int], work_dir: Path,
                            json_path: Path | None, settings: dict[str, str] | None = None,
                            rounds: int = 1, library: Path | None = None,
                            gradient_steps: int = 1000) -> dict[str, Any]:
    check_library(agent, library)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    cloning = Budget(library_episodes=0, gradient_steps=gradient_steps, test_episodes=args.episodes,
                     max_steps=args.max_steps, simulations=simulations, wall_time_s=0.0)
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        for mode in MODES:
            folder = work_dir / f"seed-{seed}" / f"memory-{mode}"
            with stack(folder, settings) as env:
                policy = train_theta(args.env, cloning, seed, library, env, folder)[0] if library else ""
                reports = [evaluate(args, agent, simulations, env, folder / f"eval-round-{r}.json", policy=policy,
                                    extra=["--memory", mode, "--seed-offset", str(seed * args.episodes)])
                           for r in range(rounds)]
            games = Games.of(*reports)
            runs.append({"seed": seed, "memory": mode, "policy_version": policy, "games_won": games.won,
                         "games_env_steps": games.env_steps, "failed_episodes": games.failed, **games.figures()})
            console.print(f"seed {seed}, memory {mode}: success {runs[-1]['success']:.0%}, "
                          f"{runs[-1]['env_steps']:.0f} env steps a game")
    result = summary(args, agent, simulations, runs, settings or {}, rounds)
    result["library"] = {"path": str(library), "gradient_steps": gradient_steps} if library else None
    show(console, result)
    if json_path is not None:
        write_report(json_path, result, Settings())
        console.print(f"wrote {json_path}")
    return result


FIGURES = ("success", "env_steps", "env_steps_per_win", "late_success", "late_env_steps")


def summary(args: EvalArgs, agent: AgentKind, simulations: int, runs: list[dict[str, Any]],
            settings: dict[str, str], rounds: int = 1) -> dict[str, Any]:
    rows = {}
    for mode in MODES:
        mine = [r for r in runs if r["memory"] == mode]
        rows[mode] = {f"{name}_{stat}": value for name in FIGURES
                      for stat, value in zip(("mean", "sd"), _mean_sd([r[name] for r in mine]), strict=True)}
    off, on = rows["off"], rows["on"]
    ratios = {f"{name}_on_over_off": on[f"{name}_mean"] / off[f"{name}_mean"] if off[f"{name}_mean"] else None
              for name in ("env_steps", "env_steps_per_win", "late_env_steps")}
    differences = {f"{name}_on_minus_off": on[f"{name}_mean"] - off[f"{name}_mean"]
                   for name in ("success", "late_success")}
    return {"env": args.env, "agent": str(agent), "simulations": simulations, "episodes": args.episodes,
            "rounds": rounds, "late_games": "the last round" if rounds > 1 else "the second half of the games",
            "max_steps": args.max_steps, "seeds": sorted({r["seed"] for r in runs}), "settings": settings,
            "runs": runs, "rows": rows, "ratios": ratios, "differences": differences}


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return _mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def show(console: Console, result: dict[str, Any]) -> None:
    table = Table(title=f"{result['agent']} at {result['simulations']} simulations on {result['env']}: "
                        f"{result['episodes']} games × {result['rounds']} round(s) a run, seeds {result['seeds']}, "
                        "memory off vs on")
    for column in ("memory", "success", "env steps a game", "env steps a won game", "late games: success",
                   "late games: env steps a game"):
        table.add_column(column)
    for mode, row in result["rows"].items():
        table.add_row(mode, f"{row['success_mean']:.0%} ± {row['success_sd']:.0%}",
                      f"{row['env_steps_mean']:.0f} ± {row['env_steps_sd']:.0f}",
                      f"{row['env_steps_per_win_mean']:.0f} ± {row['env_steps_per_win_sd']:.0f}",
                      f"{row['late_success_mean']:.0%} ± {row['late_success_sd']:.0%}",
                      f"{row['late_env_steps_mean']:.0f} ± {row['late_env_steps_sd']:.0f}")
    console.print(table)
    ratios = ", ".join(f"{k.removesuffix('_on_over_off')} {v:.2f}×" for k, v in result["ratios"].items() if v)
    differences = result["differences"]
    console.print(f"memory on ÷ off: {ratios}; success on − off: {differences['success_on_minus_off']:+.0%} "
                  f"({differences['late_success_on_minus_off']:+.0%} in the late games: {result['late_games']})")
