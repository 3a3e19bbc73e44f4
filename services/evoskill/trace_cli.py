"""`evoskill trace`: one trace from the span files of `telemetry.trace_dir`, as a tree in the terminal and as
one OTLP/JSON file that Jaeger's UI opens ("Upload JSON")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.tree import Tree

from evoskill.cli_choices import output_file
from evoskill.platform.config import Settings


def trace(
    trace_id: Annotated[str, typer.Argument(help="trace id (32 hex digits); empty with --episode")] = "",
    episode: Annotated[str, typer.Option(help="the trace of this episode id (the span attribute "
                                              "evoskill.episode_id)")] = "",
    out: Annotated[Path | None, typer.Option(callback=output_file, help="default: <trace dir>/trace-<trace id>.json")]
    = None,
) -> None:
    """Show one trace from the span files of `telemetry.trace_dir` (default <state>/traces) and write it as one
    OTLP/JSON file."""
    import json

    from evoskill.cli_support import console, fail
    from evoskill.platform.trace_file import find_traces, one_trace

    settings = Settings()
    folder = settings.state_dir / (settings.telemetry.trace_dir or "traces")
    if bool(trace_id) == bool(episode):
        fail("give a trace id or --episode, one of them", 2)
    if not any(folder.glob("*.jsonl")):
        fail(f"no span files in {folder}: start the stack with EVOSKILL_TELEMETRY__TRACE_DIR=traces "
             "(telemetry.trace_dir) to write them")
    if episode:
        found = find_traces(folder, "evoskill.episode_id", episode)
        if not found:
            fail(f"--episode {episode!r}: no span in {folder} carries it (spans are written in batches: try again "
                 "in a few seconds)")
        trace_id = found[0]
    document = one_trace(folder, trace_id)
    if not document["resourceSpans"]:
        fail(f"no span of trace {trace_id!r} in {folder}")
    console.print(span_tree(document, trace_id))
    path = out or folder / f"trace-{trace_id}.json"
    path.write_text(json.dumps(document))
    console.print(f"wrote {path} (Jaeger: Search → Upload JSON)")


def span_tree(document: dict[str, Any], trace_id: str) -> Tree:
    """The spans under their parents, each with its service and duration, in start order."""
    spans: list[tuple[str, dict[str, Any]]] = []
    for resource in document["resourceSpans"]:
        attributes = {a["key"]: a["value"].get("stringValue", "") for a in resource.get("resource", {})
                      .get("attributes", [])}
        for scope in resource["scopeSpans"]:
            spans += [(attributes.get("service.name", "?"), s) for s in scope["spans"]]
    spans.sort(key=lambda x: int(x[1].get("startTimeUnixNano", 0)))
    ids = {s["spanId"] for _, s in spans}
    root = Tree(f"trace {trace_id} ({len(spans)} spans)")
    nodes: dict[str, Tree] = {}
    for service, span in spans:  # a parent starts before its children
        took_ms = (int(span.get("endTimeUnixNano", 0)) - int(span.get("startTimeUnixNano", 0))) / 1e6
        parent = nodes.get(span.get("parentSpanId", "")) if span.get("parentSpanId") in ids else None
        nodes[span["spanId"]] = (parent or root).add(f"{span['name']} [dim]{service} · {took_ms:.1f} ms[/dim]")
    return root
