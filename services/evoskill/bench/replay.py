"""Replay benchmark: what restoring a state costs an environment without a native state copy, with the replay's
observations skipped (`quiet_replays`, the product path) and read as a live step reads them, in one run.

A search probe on ScienceWorld or TextWorldExpress restores its node's state by a reset and a replay of the
episode's actions, then steps the child; the replay's observations are never read (the snapshot's recorded one
is). The states restored are prefixes of a train-fold gold path, played on an environment without gold-path
generation (as the sandbox's sessions are); the two modes alternate, ABBA, on the same environment.

    evoskill bench replay --env 'sciworld:grow-plant?easy=1' --steps 5,10,20 --json bench-replay.json
"""

from __future__ import annotations

import statistics
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from evoskill.envs import make_env
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

MODES = {"quiet": True, "full": False}  # ScienceWorldAdapter.quiet_replays


def gold_prefix(spec: str, seed: int, steps: int) -> list[str]:
    """The first `steps` actions of the train-fold gold path that leave the episode running."""
    with closing(make_env(spec)) as env:
        env.reset(seed=seed, fold="train")
        taken: list[str] = []
        for action in (env.gold_path() or [])[:steps]:
            obs, _ = env.step(action)
            if obs.done:
                break
            taken.append(action)
        return taken


def time_restores(spec: str, seed: int, actions: list[str], repeats: int) -> dict[str, list[float]]:
    """Seconds per restore of the state after `actions`, per mode, the modes in ABBA order."""
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    with closing(make_env(spec, gold_path=False)) as env:
        if not hasattr(env, "quiet_replays"):
            raise ValueError(f"{spec}: its adapter replays nothing (a native state copy or in-place snapshots)")
        env.reset(seed=seed, fold="train")
        for action in actions:
            env.step(action)
        snapshot, recorded = env.snapshot(), env.observation()
        for _ in range(repeats):
            for mode in ("quiet", "full", "full", "quiet"):
                env.quiet_replays = MODES[mode]  # type: ignore[attr-defined]
                started = time.perf_counter()
                restored = env.restore(snapshot)
                seconds[mode].append(time.perf_counter() - started)
                if restored != recorded:
                    raise AssertionError(f"{mode} replay of {len(actions)} steps reached another state")
    return seconds


def run_replay_bench(json_path: Path | None, spec: str, steps: list[int], repeats: int, seed: int) -> dict[str, Any]:
    console = Console()
    rows = []
    for n in steps:
        actions = gold_prefix(spec, seed, n)
        seconds = time_restores(spec, seed, actions, repeats)
        quiet, full = (statistics.median(seconds[m]) for m in ("quiet", "full"))
        rows.append({"steps": len(actions), "quiet_s": quiet, "full_s": full, "speedup": full / quiet,
                     "samples": seconds})
    table = Table("replayed steps", "quiet (product) s", "full s", "full / quiet", title=f"restore on {spec}")
    for row in rows:
        table.add_row(str(row["steps"]), f"{row['quiet_s']:.3f}", f"{row['full_s']:.3f}", f"{row['speedup']:.2f}×")
    console.print(table)
    summary = {"env": spec, "seed": seed, "repeats": repeats, "rows": rows}
    if json_path is not None:
        write_report(json_path, summary, Settings())
        console.print(f"wrote {json_path}")
    return summary
