"""Spans written as OTLP/JSON lines (telemetry.trace_dir) and read back as one trace, and `evoskill trace`."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from typer.testing import CliRunner

from evoskill.cli import app
from evoskill.platform.trace_file import OtlpJsonFileExporter, find_traces, one_trace, requests


def write_two_traces(folder: Path, service: str) -> tuple[str, str, str]:
    """An episode's trace (a parent and its child) and another; their ids and the parent span's."""
    provider = TracerProvider(resource=Resource.create({"service.name": f"evoskill-{service}"}))
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonFileExporter(folder, service)))
    tracer = provider.get_tracer("test")
    with (tracer.start_as_current_span("planner.episode", attributes={"evoskill.episode_id": "ep-7"}) as parent,
          tracer.start_as_current_span("planner.search")):
        pass
    with tracer.start_as_current_span("other") as other:
        pass
    provider.shutdown()
    ids = parent.get_span_context(), other.get_span_context()
    return format(ids[0].trace_id, "032x"), format(ids[0].span_id, "016x"), format(ids[1].trace_id, "032x")


def test_spans_are_otlp_json_lines_with_hex_ids_and_one_trace_gathers_its_spans(tmp_path: Path) -> None:
    episode_trace, parent_id, other_trace = write_two_traces(tmp_path, "planner")
    (file,) = tmp_path.glob("planner-*.jsonl")
    assert len(file.read_text().splitlines()) == 3  # one export request per span (SimpleSpanProcessor)
    first = next(requests(tmp_path))
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["name"] == "planner.search" and span["traceId"] == episode_trace  # hex, as OTLP/JSON wants
    assert span["parentSpanId"] == parent_id and span["kind"] == 1  # enums as integers: SPAN_KIND_INTERNAL

    assert find_traces(tmp_path, "evoskill.episode_id", "ep-7") == [episode_trace]
    document = one_trace(tmp_path, episode_trace)
    names = [s["name"] for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert sorted(names) == ["planner.episode", "planner.search"]
    (resource,) = one_trace(tmp_path, other_trace)["resourceSpans"]
    assert {"key": "service.name", "value": {"stringValue": "evoskill-planner"}} in resource["resource"]["attributes"]


def test_evoskill_trace_by_episode_shows_the_tree_and_writes_one_file(tmp_path: Path) -> None:
    episode_trace, _, _ = write_two_traces(tmp_path / "traces", "planner")
    env = {"EVOSKILL_STATE_DIR": str(tmp_path), "EVOSKILL_TELEMETRY__TRACE_DIR": "traces", "COLUMNS": "200"}
    result = CliRunner().invoke(app, ["trace", "--episode", "ep-7"], env=env)
    assert result.exit_code == 0, result.output
    assert "planner.episode" in result.output and "planner.search" in result.output
    written = json.loads((tmp_path / "traces" / f"trace-{episode_trace}.json").read_text())
    assert len(written["resourceSpans"]) == 1

    missing = CliRunner().invoke(app, ["trace", "--episode", "ep-none"], env=env)
    assert missing.exit_code == 1 and "no span in" in missing.output
    # Unset, the folder is <state>/traces; a state folder with no span files says how to get them.
    default = CliRunner().invoke(app, ["trace", episode_trace], env={"EVOSKILL_STATE_DIR": str(tmp_path)})
    assert default.exit_code == 0 and "planner.search" in default.output
    none = CliRunner().invoke(app, ["trace", episode_trace], env={"EVOSKILL_STATE_DIR": str(tmp_path / "empty")})
    assert none.exit_code == 1 and "EVOSKILL_TELEMETRY__TRACE_DIR=traces" in none.output
