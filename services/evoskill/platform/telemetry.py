"""OpenTelemetry bootstrap shared by every service.

One call, `setup_telemetry(service)`, installs tracer and meter providers tagged with `service.name` and
`service.version` (the installed package's version), exports over OTLP/gRPC when `telemetry.otlp_endpoint`
is set (spans in batches, metrics every OTEL_METRIC_EXPORT_INTERVAL ms, default 60 s), and uses W3C trace
context, which the bus carries in NATS headers and the gRPC helpers carry in metadata. With
`telemetry.enabled` false nothing is installed: the OpenTelemetry API stays a no-op (no spans, no metrics,
no context propagated). The metrics themselves are defined in `evoskill.platform.metrics`.
"""

from __future__ import annotations

import functools
from collections.abc import MutableMapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from opentelemetry import metrics, propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

from evoskill import __version__
from evoskill.platform.config import Settings, TelemetrySettings

_installed: TracerProvider | None = None
_meter_provider: MeterProvider | None = None


@functools.cache  # tracer() asks on every span; the metadata lookup reads files
def package_version() -> str:
    try:
        return version("evoskill")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return __version__


def setup_telemetry(
    service: str,
    settings: TelemetrySettings | None = None,
    extra_processors: tuple[SpanProcessor, ...] = (),
    state_dir: Path | None = None,
) -> TracerProvider | None:
    """Install the process-wide providers once; later calls return the installed tracer provider.
    None when telemetry is disabled (and nothing was installed before). A relative `trace_dir` is under
    `state_dir`."""
    global _installed, _meter_provider
    if _installed is not None:
        for processor in extra_processors:
            _installed.add_span_processor(processor)
        return _installed
    settings = settings or Settings().telemetry
    if not settings.enabled:
        return None
    resource = Resource.create({"service.name": f"evoskill-{service}", "service.version": package_version()})
    provider = TracerProvider(resource=resource)
    readers: list[MetricReader] = []
    if settings.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint)))
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=settings.otlp_endpoint)))
    if settings.console:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        readers.append(PeriodicExportingMetricReader(ConsoleMetricExporter()))
    if settings.trace_dir:
        from evoskill.platform.trace_file import OtlpJsonFileExporter

        folder = (state_dir or Path()) / settings.trace_dir
        provider.add_span_processor(BatchSpanProcessor(OtlpJsonFileExporter(folder, service)))
    for processor in extra_processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    _meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    metrics.set_meter_provider(_meter_provider)
    _installed = provider
    return provider


def shutdown_telemetry() -> None:
    """Flush and stop: queued spans and the last metric values are exported before the process exits."""
    if _installed is not None:
        _installed.shutdown()
    if _meter_provider is not None:
        _meter_provider.shutdown()


def tracer(name: str = "evoskill") -> trace.Tracer:
    return trace.get_tracer(name, package_version())


def meter(name: str = "evoskill") -> metrics.Meter:
    return metrics.get_meter(name, package_version())


def inject(carrier: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """The current trace context as headers/metadata (W3C traceparent)."""
    carrier = {} if carrier is None else carrier
    propagate.inject(carrier)
    return carrier


def current_trace_id() -> str:
    span_context = trace.get_current_span().get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""
