"""`evoskill bench`: benchmarks run as commands (mounted by the CLI as a typer sub-app)."""

from __future__ import annotations

from pathlib import Path

import typer

bench_app = typer.Typer(help="Benchmarks.", no_args_is_help=True)


@bench_app.callback()
def _bench() -> None:
    """Benchmarks."""


@bench_app.command("planner")
def planner(
    json_path: Path | None = typer.Option(None, "--json", help="Write simulations/s per implementation here."),
    simulations: int = typer.Option(800, help="Simulations per search."),
    branching: int = typer.Option(16, help="Actions per node of the synthetic tree."),
    depth: int = typer.Option(10, help="Depth at which the synthetic tree's nodes are terminal."),
    repeats: int = typer.Option(5, help="Timed searches per implementation (the best counts)."),
) -> None:
    """evoskill's search core vs a per-node-object Python MCTS vs DeepMind's mctx, same problem."""
    from evoskill.bench.planner import run_planner_bench  # heavy imports only when run

    run_planner_bench(json_path, simulations, branching, depth, repeats)


@bench_app.command("pipeline")
def pipeline(
    json_path: Path | None = typer.Option(None, "--json", help="Write episodes/min with telemetry off and on here."),
    episodes: int = typer.Option(6, help="Timed episodes per mode (the same seeds in both)."),
    env: str = typer.Option("twx:coin", help="Environment spec of every episode."),
    simulations: int = typer.Option(16, help="MCTS simulations per step."),
    max_steps: int = typer.Option(8, help="Steps per episode at most."),
    rollout_depth: int = typer.Option(4, help="Rollout depth of the search."),
    seed: int = typer.Option(1, help="Seed of the first episode; the others follow."),
) -> None:
    """Episodes/min of the real pipeline (sandbox, reward, planner processes) with tracing and metrics
    off and on, interleaved in one run."""
    from evoskill.bench.pipeline import run_pipeline_bench  # starts processes; imported only when run

    run_pipeline_bench(json_path, episodes, env, simulations, max_steps, rollout_depth, seed)
