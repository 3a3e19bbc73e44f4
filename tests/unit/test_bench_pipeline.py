"""The pipeline benchmark: fair schedule, honest arithmetic, a collector that really receives."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evoskill.bench.pipeline import OFF, ON, Collector, Episode, Result, schedule


def test_schedule_plays_each_seed_once_per_mode_in_abba_order() -> None:
    plan = schedule(4, seed=10)
    assert plan == [(OFF, 10), (ON, 10), (ON, 11), (OFF, 11), (OFF, 12), (ON, 12), (ON, 13), (OFF, 13)]
    # A linear drift in machine load costs both modes the same: equal sums of positions.
    assert sum(i for i, (m, _) in enumerate(plan) if m == OFF) == sum(i for i, (m, _) in enumerate(plan) if m == ON)


def test_summary_reports_episodes_per_minute_and_overhead() -> None:
    result = Result([Episode(OFF, 1, 2.0, 5, 50), Episode(ON, 1, 2.5, 5, 50),
                     Episode(ON, 2, 3.0, 5, 60), Episode(OFF, 2, 2.0, 5, 60)])
    summary = result.summary()
    assert summary["tracing_off_epm"] == pytest.approx(30.0)  # 2 episodes in 4 s
    assert summary["tracing_on_epm"] == pytest.approx(60 * 2 / 5.5)
    assert summary["overhead"] == pytest.approx(5.5 / 4.0 - 1)
    assert summary["overhead_paired_median"] == pytest.approx((1.25 + 1.5) / 2 - 1)
    assert summary["mean_env_steps"] == {OFF: 55, ON: 55}


async def test_collector_counts_what_an_otlp_exporter_sends() -> None:
    collector = Collector()
    endpoint = await collector.start()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint))
    meter_provider = MeterProvider(metric_readers=[reader])

    def emit() -> None:  # exporters block: off the loop that serves the collector
        tracer = tracer_provider.get_tracer("test")
        for name in ("a", "b", "a"):
            with tracer.start_as_current_span(name):
                pass
        counter = meter_provider.get_meter("test").create_counter("things")
        counter.add(1, {"kind": "x"})
        counter.add(1, {"kind": "y"})
        meter_provider.force_flush()

    try:
        await asyncio.to_thread(emit)
    finally:
        await asyncio.to_thread(tracer_provider.shutdown)
        await asyncio.to_thread(meter_provider.shutdown)
        await collector.stop()
    assert collector.spans == 3 and collector.span_names == {"a", "b"}
    assert collector.metric_points >= 2  # one point per attribute set (a final export may repeat them)
