"""`evoskill bench pipeline` end to end: two copies of the real pipeline, each on its own nats-server with the
generated users and passwords `evoskill up` gives it (the ON copy once joined the OFF copy's server, and could not
once NATS required its users: the bench never started), telemetry off and on, figures written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evoskill.bench import bench_app


def test_bench_command_measures_both_modes_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "pipeline.json"
    args = ["pipeline", "--json", str(out), "--episodes", "1", "--simulations", "4", "--max-steps", "3"]
    result = CliRunner().invoke(bench_app, args)
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["tracing_off_epm"] > 0 and figures["tracing_on_epm"] > 0
    assert figures["overhead"] == pytest.approx(figures["tracing_off_epm"] / figures["tracing_on_epm"] - 1)
    assert figures["spans_exported"] > 0 and figures["metric_points_exported"] > 0
    assert figures["mean_env_steps"]["off"] == figures["mean_env_steps"]["on"]  # the same work in both
