"""Replay benchmark: what restoring a state costs an environment without a native state copy, with the replay's
observations skipped (`quiet_replays`, the product path) and read as a live step reads them, in one run.

A search probe on ScienceWorld or TextWorldExpress restores its node's state by a reset and a replay of the
episode's actions, then steps the child; the replay's observations are never read (the snapshot's recorded one
is). The states restored are prefixes of a train-fold gold path, played on an environment without gold-path
generation (as the sandbox's sessions are); the two modes alternate, ABBA, on the same environment. On
ScienceWorld the restored state's listed actions are also read both ways, ABBA, each in the draws `_info` reads
it in: from ScienceWorld's JSON listing (the product) and from its Java list action by action (before).

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
from evoskill.envs.scienceworld_env import ScienceWorldAdapter
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

MODES = {"quiet": True, "full": False}  # ScienceWorldAdapter.quiet_replays
LISTINGS = ("json", "java_list")  # a state's listed actions: `ScienceWorldAdapter.listed`, `listing_by_element`


def listing_by_element(env: ScienceWorldAdapter) -> list[str]:
    """The listed actions as the adapter read them before `ScienceWorldAdapter.listed`: ScienceWorld's Java list,
    iterated from Python a py4j round trip an action."""
    return list(env._env.server.getValidActionObjectCombinations())


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
    """Seconds per restore of the state after `actions`, per mode, the modes in ABBA order; on ScienceWorld also
    seconds per listing of the state's actions, both ways (a probe lists the state it reaches)."""
    seconds: dict[str, list[float]] = {mode: [] for mode in (*MODES, *LISTINGS)}
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
            if isinstance(env, ScienceWorldAdapter):
                time_listings(env, seconds, len(actions))
    return {way: samples for way, samples in seconds.items() if samples}


def time_listings(env: ScienceWorldAdapter, seconds: dict[str, list[float]], steps: int) -> None:
    """Both listings of the state `env` stands in, ABBA, each in draws of its own as `_info` reads it (two in one
    hold of the draws may name actions apart); the same actions either way, or AssertionError."""
    listed: dict[str, list[str]] = {}
    for way in ("json", "java_list", "java_list", "json"):
        with env._fixed_draws:
            started = time.perf_counter()
            listed[way] = env.listed() if way == "json" else listing_by_element(env)
            seconds[way].append(time.perf_counter() - started)
    if sorted(listed["json"]) != sorted(listed["java_list"]):
        raise AssertionError(f"the two listings differ after {steps} steps")


def run_replay_bench(json_path: Path | None, spec: str, steps: list[int], repeats: int, seed: int) -> dict[str, Any]:
    console = Console()
    rows = []
    for n in steps:
        actions = gold_prefix(spec, seed, n)
        seconds = time_restores(spec, seed, actions, repeats)
        medians = {way: statistics.median(samples) for way, samples in seconds.items()}
        row = {"steps": len(actions), "quiet_s": medians["quiet"], "full_s": medians["full"],
               "speedup": medians["full"] / medians["quiet"], "samples": seconds}
        if "json" in medians:
            row |= {"listing_json_s": medians["json"], "listing_java_list_s": medians["java_list"],
                    "listing_speedup": medians["java_list"] / medians["json"]}
        rows.append(row)
    table = Table("replayed steps", "quiet (product) s", "full s", "full / quiet", "listing: JSON (product) s",
                  "Java list s", "Java list / JSON", title=f"restore on {spec}")
    for row in rows:
        listing = ([f"{row['listing_json_s']:.4f}", f"{row['listing_java_list_s']:.4f}",
                    f"{row['listing_speedup']:.2f}×"] if "listing_json_s" in row else ["–"] * 3)
        table.add_row(str(row["steps"]), f"{row['quiet_s']:.3f}", f"{row['full_s']:.3f}", f"{row['speedup']:.2f}×",
                      *listing)
    console.print(table)
    summary = {"env": spec, "seed": seed, "repeats": repeats, "rows": rows}
    if json_path is not None:
        write_report(json_path, summary, Settings())
        console.print(f"wrote {json_path}")
    return summary
