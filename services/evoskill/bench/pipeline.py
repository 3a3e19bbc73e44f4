"""Pipeline benchmark: what tracing and metrics cost whole episodes, over the real services.

Two copies of the pipeline (sandbox, reward, planner, each its own process, as `evoskill up` runs them), each
with its own nats-server (its users and generated passwords, as `evoskill up` starts it: one copy's services
cannot join the other's server, whose users may use their own subjects only), sharing one Temporal: one with
telemetry disabled (the OpenTelemetry API stays a no-op), one with the SDK installed, exporting spans in batches
and metrics every few seconds over OTLP/gRPC to a collector inside this process that decodes and counts what
arrives. The same episodes (same environment, seeds and search settings) alternate between the two, pairs in
ABBA order, so drift on a shared machine falls on both; one untimed episode per copy warms JVMs and caches first.

Reported: episodes per minute for each, `overhead` = off_epm / on_epm - 1 (the extra time an episode
takes with telemetry on), the median of the per-seed time ratios (robust to one noisy episode), and
the spans and metric points the collector received.

    evoskill bench pipeline --json bench-pipeline.json
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from rich.console import Console
from rich.table import Table

from evoskill.core.agent import AgentKind
from evoskill.planner.client import episode_request, play
from evoskill.platform.config import NatsSettings, ServiceEndpoint, Settings, TelemetrySettings, TemporalSettings
from evoskill.platform.provenance import write_report
from evoskill.stack.supervisor import Stack, free_ports

OFF, ON = "off", "on"
SERVICES = ("sandbox", "reward", "planner")
METRIC_EXPORT_MS = 2000  # the ON copy exports metrics this often, so export costs fall inside the run


class Collector(trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer):
    """An OTLP/gRPC receiver that decodes and counts what the services export."""

    def __init__(self) -> None:
        self.spans = 0
        self.metric_points = 0
        self.span_names: set[str] = set()
        self.server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self) -> str:
        self.server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(1.0)

    async def Export(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans += len(scope.spans)
                    self.span_names.update(span.name for span in scope.spans)
            return trace_service_pb2.ExportTraceServiceResponse()
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    self.metric_points += len(getattr(metric, kind).data_points) if kind else 0
        return metrics_service_pb2.ExportMetricsServiceResponse()


@dataclass
class Episode:
    mode: str
    seed: int
    seconds: float
    steps: int
    env_steps: int


@dataclass
class Result:
    episodes: list[Episode] = field(default_factory=list)
    spans: int = 0
    metric_points: int = 0
    span_names: list[str] = field(default_factory=list)

    def of(self, mode: str) -> list[Episode]:
        return [e for e in self.episodes if e.mode == mode]

    def epm(self, mode: str) -> float:
        played = self.of(mode)
        return 60.0 * len(played) / sum(e.seconds for e in played) if played else 0.0

    def summary(self) -> dict[str, Any]:
        off_epm, on_epm = self.epm(OFF), self.epm(ON)
        off = {e.seed: e.seconds for e in self.of(OFF)}
        ratios = [e.seconds / off[e.seed] for e in self.of(ON) if off.get(e.seed)]
        return {
            "tracing_off_epm": off_epm,
            "tracing_on_epm": on_epm,
            "overhead": off_epm / on_epm - 1.0 if on_epm else 0.0,
            "overhead_paired_median": statistics.median(ratios) - 1.0 if ratios else 0.0,
            "episodes_per_mode": len(self.of(ON)),
            "mean_steps": {m: statistics.fmean(e.steps for e in self.of(m)) for m in (OFF, ON) if self.of(m)},
            "mean_env_steps": {m: statistics.fmean(e.env_steps for e in self.of(m)) for m in (OFF, ON) if self.of(m)},
            "spans_exported": self.spans,
            "metric_points_exported": self.metric_points,
        }


def schedule(episodes: int, seed: int) -> list[tuple[str, int]]:
    """Each seed once per mode, pairs alternating OFF-ON, ON-OFF (ABBA), so a trend in machine load
    falls equally on both modes."""
    plan: list[tuple[str, int]] = []
    for i in range(episodes):
        pair = (OFF, ON) if i % 2 == 0 else (ON, OFF)
        plan.extend((mode, seed + i) for mode in pair)
    return plan


def stack_settings(state_dir: Path, mode: str, telemetry: TelemetrySettings, temporal_address: str = "") -> Settings:
    """Settings of one copy on free ports, its own stream, under its own state folder."""
    base = Settings()
    nats, temporal, *services = free_ports(2 + len(SERVICES))
    return base.model_copy(update={
        "state_dir": state_dir / mode,
        "nats": NatsSettings(port=nats, stream=f"BENCH{mode.upper()}",
                             subject_prefix=f"bench{mode}"),
        "temporal": TemporalSettings(address=temporal_address, port=temporal, ui_port=0),  # no UI: copies side by side
        "telemetry": telemetry,
        **{f"{name}_endpoint": ServiceEndpoint(port=port) for name, port in zip(SERVICES, services, strict=True)},
    })


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    """Variables the stack's children inherit (OpenTelemetry SDK settings read from the environment)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


async def play_one(settings: Settings, mode: str, seed: int, env: str, simulations: int, max_steps: int,
                   rollout_depth: int) -> Episode:
    request = episode_request(env, seed, "train", AgentKind.MCTS, simulations, max_steps, rollout_depth=rollout_depth)
    started = time.perf_counter()
    outcome = await play(settings, request)
    return Episode(mode, seed, time.perf_counter() - started, outcome.steps, outcome.env_steps)


async def measure(episodes: int, env: str, simulations: int, max_steps: int, rollout_depth: int, seed: int,
                  say: Any = print) -> Result:
    collector = Collector()
    endpoint = await collector.start()
    result = Result()
    with tempfile.TemporaryDirectory(prefix="evoskill-bench-") as tmp:
        off = stack_settings(Path(tmp), OFF, TelemetrySettings(enabled=False))
        stacks: dict[str, tuple[Settings, Stack]] = {OFF: (off, Stack(off, services=SERVICES))}
        try:
            say("starting the pipeline with telemetry off (and its nats-server, Temporal)")
            await stacks[OFF][1].start()
            on = stack_settings(Path(tmp), ON, TelemetrySettings(enabled=True, otlp_endpoint=endpoint),
                                temporal_address=off.temporal_address)
            stacks[ON] = (on, Stack(on, services=SERVICES))
            say("starting the pipeline with telemetry on")
            with environment(OTEL_METRIC_EXPORT_INTERVAL=str(METRIC_EXPORT_MS)):
                await stacks[ON][1].start()
            for mode in (OFF, ON):  # warm-up: JVMs, kernels, connections; not timed
                await play_one(stacks[mode][0], mode, seed + episodes, env, simulations, max_steps, rollout_depth)
            for mode, episode_seed in schedule(episodes, seed):
                played = await play_one(stacks[mode][0], mode, episode_seed, env, simulations, max_steps,
                                        rollout_depth)
                say(f"  {mode:>3}  seed {episode_seed}: {played.seconds:.2f} s, {played.steps} steps")
                result.episodes.append(played)
        finally:
            for mode in (ON, OFF):  # the ON services flush their spans and metrics on the way out
                if mode in stacks:
                    await asyncio.to_thread(stacks[mode][1].stop)
            await collector.stop()
    result.spans, result.metric_points = collector.spans, collector.metric_points
    result.span_names = sorted(collector.span_names)
    return result


def run_pipeline_bench(json_path: Path | None, episodes: int, env: str, simulations: int, max_steps: int,
                       rollout_depth: int, seed: int) -> dict[str, Any]:
    console = Console()
    result = asyncio.run(measure(episodes, env, simulations, max_steps, rollout_depth, seed,
                                 say=lambda line: console.print(line, highlight=False)))
    summary = result.summary()
    if result.episodes and not result.spans:
        raise RuntimeError("the telemetry-on pipeline exported no spans: the comparison would measure nothing")
    table = Table("telemetry", "episodes/min", "episodes", "mean steps", "mean env steps")
    for mode in (OFF, ON):
        table.add_row(mode, f"{result.epm(mode):.1f}", str(len(result.of(mode))),
                      f"{summary['mean_steps'].get(mode, 0):.1f}", f"{summary['mean_env_steps'].get(mode, 0):.1f}")
    console.print(table)
    console.print(f"overhead of tracing + metrics: {100 * summary['overhead']:+.1f} % "
                  f"(paired median {100 * summary['overhead_paired_median']:+.1f} %); "
                  f"{summary['spans_exported']} spans and {summary['metric_points_exported']} metric points exported")
    summary["settings"] = {"env": env, "simulations": simulations, "max_steps": max_steps,
                           "rollout_depth": rollout_depth, "seed": seed, "cpus": os.cpu_count()}
    if json_path is not None:
        write_report(json_path, summary, Settings())
    return summary
