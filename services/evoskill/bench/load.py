"""Load benchmark: many concurrent episodes through the whole embedded stack, then the reconciliation.

One stack (nats-server, Temporal, every service its own process, on free ports and a temporary state folder,
loopback only) plays `episodes` train-fold episodes, `concurrency` at a time, for at most `max_seconds` (no new
episode starts after it). Measured from the client: episodes per minute, real steps per second, and each step's
latency (the time between two steps of an episode arriving on the PlayEpisode stream, search included; the
first step, which waits for the session's environment to start, is reported apart).

Then, once every durable consumer has acknowledged everything, the counts of the run are read from each
part's own store (`stack.counts`) and reconciled: episodes finished = episode.completed events = episodes in the
learner's replay; steps published = steps scored = experiences in memory, none twice (a lost episode's steps
were published, so they are experiences too); no dead letter.

    evoskill bench pipeline --load --episodes 24 --concurrency 8 --json bench-load.json
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from evoskill.planner.client import episode_request, play
from evoskill.platform.config import ServiceEndpoint, Settings
from evoskill.platform.provenance import write_report
from evoskill.stack.counts import drained, read_stream, replay_ids, stop_for_good, stored_experiences
from evoskill.stack.supervisor import Stack, free_ports

SERVICES = ("sandbox", "reward", "memory", "planner", "learner", "orchestrator")
STARTUP_S = 600.0  # a loaded machine: the memory's embedding model and the learner's torch load slowly


@dataclass
class Played:
    episode_id: str
    seconds: float
    steps: int
    step_latencies: list[float] = field(default_factory=list)  # from the second step on
    first_step_s: float = 0.0  # start to the first step: the session's open (an environment's start) included
    error: str = ""


def load_settings(state_dir: Path) -> Settings:
    """The user's settings on an embedded stack of the run's own: free ports, its own state folder, local
    Qdrant (whose folder the reconciliation reads)."""
    base = Settings()
    nats, temporal, *services = free_ports(2 + len(SERVICES))
    return base.model_copy(update={
        "state_dir": state_dir,
        "nats": base.nats.model_copy(update={"url": "", "port": nats}),
        "temporal": base.temporal.model_copy(update={"address": "", "port": temporal, "ui_port": 0}),
        "qdrant": base.qdrant.model_copy(update={"url": ""}),
        **{f"{name}_endpoint": ServiceEndpoint(port=port) for name, port in zip(SERVICES, services, strict=True)},
    })


async def play_timed(settings: Settings, episode_id: str, env: str, seed: int, agent: str, simulations: int,
                     max_steps: int) -> Played:
    request = episode_request(env, seed, "train", agent, simulations, max_steps)
    request.episode_id = episode_id
    latencies: list[float] = []
    last = started = time.perf_counter()

    def on_update(update: Any) -> None:
        nonlocal last
        if update.action:
            now = time.perf_counter()
            latencies.append(now - last)
            last = now

    try:
        outcome = await play(settings, request, on_update)
    except Exception as exc:  # an episode lost to the services is counted, not fatal
        return Played(episode_id, time.perf_counter() - started, len(latencies), latencies[1:],
                      latencies[0] if latencies else 0.0, f"{exc}"[:300])
    return Played(episode_id, time.perf_counter() - started, outcome.steps, latencies[1:],
                  latencies[0] if latencies else 0.0)


async def drive(settings: Settings, run_id: str, env: str, episodes: int, concurrency: int, agent: str,
                simulations: int, max_steps: int, max_seconds: float, say: Any) -> tuple[list[Played], float]:
    """Play up to `episodes`, `concurrency` at a time; none starts after `max_seconds`. Returns them and the
    wall time from the first start to the last end."""
    slots = asyncio.Semaphore(concurrency)
    started = time.perf_counter()

    async def one(i: int) -> Played | None:
        async with slots:
            if time.perf_counter() - started > max_seconds:
                return None
            played = await play_timed(settings, f"{run_id}-{i:04d}", env, i, agent, simulations, max_steps)
            say(f"  {played.episode_id}: {played.steps} steps, {played.seconds:.1f} s"
                + (f", lost: {played.error}" if played.error else ""))
            return played

    results = await asyncio.gather(*(one(i) for i in range(episodes)))
    return [r for r in results if r is not None], time.perf_counter() - started


async def reconcile(stack: Stack, run_id: str, played: list[Played]) -> dict[str, Any]:
    """The run's counts in every store, and whether they agree (see the module's docstring)."""
    finished = {p.episode_id for p in played if not p.error}
    all_acked = await drained(stack)
    replay = replay_ids(stack.settings, run_id)
    stream = await read_stream(stack, run_id)
    await asyncio.to_thread(stop_for_good, stack, "memory")
    experiences = await asyncio.to_thread(stored_experiences, stack.settings, run_id)
    keys = Counter((str(e["episode_id"]), int(e["step_index"])) for e in experiences)
    final_keys = {(episode, i) for episode, steps in stream.completed.items() for i in range(steps[-1])}
    counts = {
        "episodes_finished": len(finished),
        "episodes_lost": sum(bool(p.error) for p in played),
        "episode_completed_events": sum(len(v) for v in stream.completed.values()),
        "episodes_in_replay": len(replay),
        "steps_of_finished_episodes": sum(p.steps for p in played if not p.error),
        "step_executed_events": sum(stream.steps.values()),
        "reward_scored_events": sum(stream.scored.values()),
        "experiences_stored": len(experiences),
        "duplicate_experiences": sum(n - 1 for n in keys.values()),
        "dead_letters": stream.dead_letters,
        "consumers_drained": all_acked,
    }
    checks = {
        "every finished episode completed once": set(stream.completed) == finished
        and all(len(v) == 1 for v in stream.completed.values()),
        "every finished episode in replay once": sorted(replay) == sorted(finished),
        "every step published once and scored once": stream.steps == stream.scored
        and max(stream.steps.values(), default=1) == 1 and final_keys <= set(stream.steps),
        # A lost episode's published steps are experiences too (its outcome stays pending).
        "every published step one experience": set(keys) == set(stream.steps) and max(keys.values(), default=1) == 1,
        "no dead letter": stream.dead_letters == 0,
        "consumers drained": all_acked,
    }
    return {"counts": counts, "checks": checks, "reconciled": all(checks.values())}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


async def measure_load(settings: Settings, episodes: int, concurrency: int, env: str, agent: str, simulations: int,
                       max_steps: int, max_seconds: float, say: Any = print) -> dict[str, Any]:
    run_id = f"load-{uuid.uuid4().hex[:8]}"
    stack = Stack(settings)
    say(f"starting the embedded stack ({', '.join(SERVICES)}, nats-server, Temporal)")
    await stack.start(timeout_s=STARTUP_S)
    try:
        say(f"playing {episodes} episodes of {env}, {concurrency} at a time (agent {agent})")
        played, wall = await drive(settings, run_id, env, episodes, concurrency, agent, simulations, max_steps,
                                   max_seconds, say)
        say("reconciling the counts")
        reconciliation = await reconcile(stack, run_id, played)
    finally:
        await asyncio.to_thread(stack.stop)
    latencies = [s for p in played for s in p.step_latencies]
    steps = sum(p.steps for p in played)
    return {
        "run_id": run_id,
        "episodes_played": len(played),
        "wall_time_s": wall,
        "episodes_per_min": 60.0 * len(played) / wall if wall else 0.0,
        "steps_per_s": steps / wall if wall else 0.0,
        "step_latency_p50_s": percentile(latencies, 50),
        "step_latency_p99_s": percentile(latencies, 99),
        "step_latency_mean_s": statistics.fmean(latencies) if latencies else 0.0,
        "first_step_p50_s": percentile([p.first_step_s for p in played if p.steps], 50),
        "errors": [p.error for p in played if p.error],
        **reconciliation,
        "settings": {"env": env, "agent": agent, "episodes": episodes, "concurrency": concurrency,
                     "simulations": simulations, "max_steps": max_steps, "max_seconds": max_seconds},
    }


def run_load_bench(json_path: Path | None, episodes: int, concurrency: int, env: str, agent: str, simulations: int,
                   max_steps: int, max_seconds: float) -> bool:
    """Run, print and write the figures; True when the counts reconcile."""
    console = Console()
    with tempfile.TemporaryDirectory(prefix="evoskill-load-") as tmp:
        Path(tmp).chmod(0o755)  # as a state folder made by hand: a root sandbox's workers run as sandbox.run_as
        result = asyncio.run(measure_load(load_settings(Path(tmp) / "state"), episodes, concurrency, env, agent,
                                          simulations, max_steps, max_seconds,
                                          say=lambda line: console.print(line, highlight=False)))
    console.print(f"{result['episodes_played']} episodes in {result['wall_time_s']:.0f} s, {concurrency} at a time: "
                  f"[bold]{result['episodes_per_min']:.1f}[/] episodes/min, {result['steps_per_s']:.1f} steps/s; "
                  f"step latency p50 {1000 * result['step_latency_p50_s']:.0f} ms, "
                  f"p99 {1000 * result['step_latency_p99_s']:.0f} ms; first step (the environment's start "
                  f"included) p50 {result['first_step_p50_s']:.1f} s")
    table = Table("count", "value", title="reconciliation")
    for name, value in result["counts"].items():
        table.add_row(name.replace("_", " "), str(value))
    console.print(table)
    for check, ok in result["checks"].items():
        console.print(f"  {'[green]ok[/]' if ok else '[red]FAILED[/]'}  {check}")
    if json_path is not None:
        write_report(json_path, result, Settings())  # with its `run`: revision, versions, settings
        console.print(f"wrote {json_path}")
    return bool(result["reconciled"])
