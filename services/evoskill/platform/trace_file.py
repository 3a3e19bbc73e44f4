"""Spans to a file, to open on one machine without a collector (`telemetry.trace_dir`).

Each process appends to its own `<service>-<pid>.jsonl`: one OTLP/JSON `ExportTraceServiceRequest` per line, as
the OpenTelemetry Collector's file exporter writes them (its `otlpjsonfile` receiver reads them back, and a
line POSTs as is to any OTLP/HTTP endpoint's `/v1/traces`, Jaeger's included). `one_trace` gathers one
trace's spans from every file into a single `{"resourceSpans": [...]}` document, the form Jaeger's UI opens
with "Upload JSON".
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class OtlpJsonFileExporter(SpanExporter):
    """Appends each batch as one OTLP/JSON line and flushes it, so a reader sees whole lines."""

    def __init__(self, folder: Path, service: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{service}-{os.getpid()}.jsonl"
        self._file = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
        line = json.dumps(_otlp_json(request), separators=(",", ":"))
        with self._lock:
            if self._file.closed:
                return SpanExportResult.FAILURE
            self._file.write(line + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            self._file.close()


def _otlp_json(value: Any) -> Any:
    """Protobuf's JSON mapping, with the ids hex as OTLP/JSON requires (protobuf writes bytes as base64; enums
    are already integers)."""
    if isinstance(value, list):
        return [_otlp_json(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: base64.b64decode(v).hex() if k in ID_FIELDS and isinstance(v, str) else _otlp_json(v)
            for k, v in value.items()}


def requests(folder: Path) -> Iterator[dict[str, Any]]:
    """Every exported batch in the folder's files."""
    for path in sorted(folder.glob("*.jsonl")):
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def one_trace(folder: Path, trace_id: str) -> dict[str, Any]:
    """The spans of `trace_id` from every process, as one OTLP/JSON document: one entry per process and
    instrumentation scope (empty `resourceSpans` if none)."""
    wanted = trace_id.lower()
    by_resource: dict[str, dict[str, list[dict[str, Any]]]] = {}  # resource -> scope -> spans, both as JSON
    for request in requests(folder):
        for resource in request.get("resourceSpans", []):
            scopes = by_resource.setdefault(json.dumps(resource.get("resource", {}), sort_keys=True), {})
            for scope in resource.get("scopeSpans", []):
                spans = [s for s in scope.get("spans", []) if s.get("traceId") == wanted]
                if spans:
                    scopes.setdefault(json.dumps(scope.get("scope", {}), sort_keys=True), []).extend(spans)
    return {"resourceSpans": [
        {"resource": json.loads(resource), "scopeSpans": [{"scope": json.loads(scope), "spans": spans}
                                                          for scope, spans in scopes.items()]}
        for resource, scopes in by_resource.items() if scopes]}


def find_traces(folder: Path, attribute: str, value: str) -> list[str]:
    """The ids of traces with a span whose `attribute` is `value` (e.g. evoskill.episode_id), first seen first."""
    found: dict[str, None] = {}
    for request in requests(folder):
        for resource in request.get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    if any(a.get("key") == attribute and value in a.get("value", {}).values()
                           for a in span.get("attributes", [])):
                        found[span["traceId"]] = None
    return list(found)
