"""`evoskill bench`: benchmarks run as commands (mounted by the CLI as a typer sub-app)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import typer

from evoskill.bench.suites import AGENTS
from evoskill.cli_choices import (
    AgentKind,
    Agents,
    Curiosity,
    Engine,
    Engines,
    EntropyTrigger,
    ExploreEpsilon,
    Memory,
    Novelty,
    Numbers,
    agents,
    engines,
    exploration_config,
    numbers,
)

bench_app = typer.Typer(help="Benchmarks.", no_args_is_help=True)


@bench_app.callback()
def _bench() -> None:
    """Benchmarks."""


@contextlib.contextmanager
def _one_line_errors(*kinds: type[Exception], code: int = 2) -> Iterator[None]:
    """An error of `kinds` raised inside ends the command in one line, "error: …", and exit `code`, not a
    traceback."""
    try:
        yield
    except kinds as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code) from None


@bench_app.command("planner")
def planner(
    json_path: Path | None = typer.Option(None, "--json", help="Write simulations/s per implementation here."),
    simulations: int = typer.Option(800, min=1, help="Simulations per search."),
    branching: int = typer.Option(16, min=1, help="Actions per node of the synthetic tree."),
    depth: int = typer.Option(10, min=1, help="Depth at which the synthetic tree's nodes are terminal."),
    repeats: int = typer.Option(5, min=1, help="Timed searches per implementation (the best counts)."),
) -> None:
    """evoskill's search core vs a per-node-object Python MCTS vs DeepMind's mctx, same problem."""
    from evoskill.bench.planner import run_planner_bench  # heavy imports only when run

    run_planner_bench(json_path, simulations, branching, depth, repeats)


@bench_app.command("replay")
def replay(
    env: str = typer.Option("sciworld:grow-plant?easy=1", help="A spec whose adapter restores by replay."),
    steps: Numbers = typer.Option("5,10,20", parser=numbers(least=1), metavar="STEPS",
                                  help="Lengths of the gold-path prefixes restored, comma-separated."),
    repeats: int = typer.Option(3, min=1, help="ABBA rounds per length (each restores twice per mode)."),
    seed: int = typer.Option(0, min=0, help="The train-fold game."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the rows and ratios here."),
) -> None:
    """Restoring a state by replay with its observations skipped (the product path) vs read, side by side."""
    from evoskill.bench.replay import run_replay_bench  # starts a JVM; imported only when run

    with _one_line_errors(ValueError):
        run_replay_bench(json_path, env, list(steps), repeats, seed)


@bench_app.command("reader")
def reader(
    weights: Path = typer.Option(..., exists=True, dir_okay=False, help="A learner's weights/vNNNNNN.pt (reader θ)."),
    policy: Path = typer.Option(..., exists=True, dir_okay=False, help="The ONNX file published from them."),
    library: Path = typer.Option(..., exists=True, dir_okay=False, help="A library JSONL whose states are timed."),
    states: int = typer.Option(40, min=1, help="States timed (the library's first with candidates)."),
    repeats: int = typer.Option(3, min=1, help="ABBA rounds per state."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the rows and the ratio here."),
) -> None:
    """θ's inference per state: the published policy file vs the same weights exported by this code."""
    from evoskill.bench.reader import run_reader_bench  # torch and onnxruntime load only when run

    with _one_line_errors(ValueError):
        run_reader_bench(json_path, weights, policy, library, states, repeats)


@bench_app.command("cloning-step")
def cloning_step(
    library: Path = typer.Option(..., exists=True, dir_okay=False, help="A library JSONL (`evoskill demos`)."),
    batches: int = typer.Option(10, min=1, help="The learner's batches of it, drawn once and timed each round."),
    repeats: int = typer.Option(3, min=1, help="ABBA rounds."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the timings and differences here."),
) -> None:
    """θ's cloning step with the reader's training kernels vs its serving kernels, the same weights and batches."""
    from evoskill.bench.reader import run_cloning_step_bench  # torch loads only when run

    with _one_line_errors(ValueError):
        run_cloning_step_bench(json_path, library, batches, repeats)


@bench_app.command("kernels")
def kernels_cmd(
    library: Path = typer.Option(..., exists=True, dir_okay=False, help="A library JSONL (`evoskill demos`)."),
    episodes: int = typer.Option(100, min=1, help="Its first episodes imported."),
    steps: int = typer.Option(100, min=1, help="Learner updates."),
    seed: int = typer.Option(3, min=1, help="The training seed (as `library train --seed`)."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the rows here."),
) -> None:
    """The same cloning in fresh processes: twice as this machine runs it, then with torch, MKL and oneDNN held
    to AVX2 kernels; whether θ comes out the same."""
    from evoskill.bench.kernels import run_kernels_bench  # torch loads only when run

    with _one_line_errors(ValueError, RuntimeError):
        run_kernels_bench(json_path, library, episodes, steps, seed)


@bench_app.command("pipeline")
def pipeline(
    json_path: Path | None = typer.Option(None, "--json", help="Write the figures here."),
    episodes: int = typer.Option(6, min=1, help="Timed episodes per mode (the same seeds in both); with --load, "
                                                "episodes in all."),
    env: str = typer.Option("twx:coin", help="Environment spec of every episode."),
    simulations: int = typer.Option(16, min=1, help="MCTS simulations per step."),
    max_steps: int = typer.Option(8, min=1, help="Steps per episode at most."),
    rollout_depth: int = typer.Option(4, min=0, help="Rollout depth of the search."),
    seed: int = typer.Option(1, help="Seed of the first episode; the others follow."),
    load: bool = typer.Option(False, "--load", help="Instead: --episodes through the whole stack, --concurrency "
                                                     "at a time; episodes/min, step latency, the reconciliation."),
    concurrency: int = typer.Option(8, min=1, help="--load: episodes played at once."),
    max_seconds: float = typer.Option(600.0, min=1.0, help="--load: no episode starts after this."),
    agent: AgentKind = typer.Option(AgentKind.MCTS, help="--load: the agent of every episode."),
) -> None:
    """Episodes/min of the real pipeline (sandbox, reward, planner processes) with tracing and metrics
    off and on, interleaved in one run; with --load, many concurrent episodes through the whole stack and
    the counts of every store reconciled."""
    from evoskill.stack.supervisor import StackError

    with _one_line_errors(StackError, code=1):  # a server that did not start in time
        if load:
            from evoskill.bench.load import run_load_bench  # starts processes; imported only when run

            if not run_load_bench(json_path, episodes, concurrency, env, agent, simulations, max_steps, max_seconds):
                raise typer.Exit(1)
            return
        from evoskill.bench.pipeline import run_pipeline_bench  # starts processes; imported only when run

        run_pipeline_bench(json_path, episodes, env, simulations, max_steps, rollout_depth, seed)


@bench_app.command("outer-loop")
def outer_loop(
    env: str = typer.Option("twx:coin", help="Environment spec of the training and test games."),
    seeds: Numbers = typer.Option("0,1,2", parser=numbers(least=0), metavar="SEEDS",
                                  help="Training seeds, comma-separated; each trains a fresh θ."),
    simulations: int = typer.Option(4, min=1, help="Simulations of θ + MCTS and of the same-budget uniform MCTS."),
    baseline_multiple: int = typer.Option(3, min=1, help="The other uniform MCTS gets this many times the "
                                                         "simulations."),
    train_args: str = typer.Option(
        "--epochs 3 --episodes-per-epoch 8 --eval-episodes 4 --simulations 8 --max-steps 40 --train-steps 100",
        help="Arguments of `evoskill train` (the training budget)."),
    episodes: int = typer.Option(20, min=1, help="Test-fold games per agent (seeds 0..N-1)."),
    max_steps: int = typer.Option(50, min=1, help="Steps per test game at most."),
    parallel: int = typer.Option(2, min=1, help="Test games played at once."),
    work_dir: Path = typer.Option(Path(".evoskill/bench/outer-loop"), help="Stacks, reports and logs go here."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the summary here."),
    baselines_from: Path | None = typer.Option(
        None, help="Reuse the baselines of an earlier summary (same env, games and simulations) instead of "
                   "playing them again."),
) -> None:
    """Train θ on fresh stacks (one per seed) and compare it with random and uniform-prior MCTS."""
    from evoskill.bench.outer_loop import EvalArgs, run_outer_loop_bench  # starts stacks; imported only when run

    run_outer_loop_bench(EvalArgs(env, episodes, max_steps, parallel), seeds,
                         simulations, baseline_multiple, train_args, work_dir.resolve(), json_path, baselines_from)


@bench_app.command("quality")
def quality(
    suite: str | None = typer.Option(None, help="cooking-easy, cooking-hard, coin, simonsays, peckingorder, "
                                                "tw-treasure-hunter, tw-simple, scienceworld-<task>"),
    env: str | None = typer.Option(None, help="Run the suite's protocol on this environment instead; alone, its "
                                   "family's (sciworld: EMPO²'s, tw: the TextWorld suites', bfcl: its 120 train "
                                   "entries, else TWX's)."),
    quick: bool = typer.Option(False, "--quick", help="The suite's few-minute smoke budget."),
    seeds: int = typer.Option(3, min=1, help="Training seeds (0..N-1); each trains θ on a fresh stack."),
    first_seed: int = typer.Option(0, min=0, help="Start the training seeds here (a run of seeds 1..2 after one "
                                                  "of 0)."),
    workers: int = typer.Option(2, min=1, help="Worker processes generating the library."),
    set_: list[str] = typer.Option([], "--set", help="A setting for every process, e.g. learner.encoder=reader."),
    budget: list[str] = typer.Option([], "--budget", help="Change the suite's budget, e.g. simulations=8 "
                                                          "(recorded with the figures)."),
    work_dir: Path = typer.Option(Path(".evoskill/bench/quality"), help="Library, stacks, reports and logs."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the summary here."),
    library: Path | None = typer.Option(None, help="Reuse this library (JSONL, e.g. an earlier run's) instead of "
                                                   "generating the suite's."),
    rows: Agents = typer.Option(",".join(AGENTS), "--agents", parser=agents, metavar="AGENTS",
                                help="The rows to play, comma-separated (an ablation or a rerun of θ's rows needs "
                                     "no baselines)."),
    ablate: bool = typer.Option(False, "--ablate", help="Instead of the agents: θ + MCTS as the full system, "
                                                        "without memory, exploration, offline data, curiosity "
                                                        "(a stack and a θ per row and seed)."),
    rows_from: list[Path] = typer.Option([], "--rows-from", help="With --ablate: an earlier run's row record "
                                                                 "(seed-N/ROW/row.json), used instead of playing "
                                                                 "that seed's row again; repeatable."),
    choose: str | None = typer.Option(None, help="group.name=V1,V2: per seed, θ trained with each value, the "
                                                 "best alone on the dev fold plays the test games "
                                                 "(e.g. learner.rename_share=0,0.5)."),
    memory: Memory = None,
    explore_epsilon: ExploreEpsilon = None,
    novelty: Novelty = None,
    curiosity: Curiosity = None,
    entropy_trigger: EntropyTrigger = None,
) -> None:
    """Library → θ (3 seeds) → random, uniform MCTS, θ alone and θ + MCTS on the test fold, with the budget;
    `--ablate`: θ + MCTS of the full system against each part taken out (bench/ablation.py)."""
    from evoskill.bench.quality import Choice, agent_rows, run_quality_bench, setting_overrides  # when run
    from evoskill.bench.suites import resolve, with_budget

    with _one_line_errors(ValueError):
        choice = Choice.parse(choose) if choose else None
        if choice and ablate:
            raise ValueError("--choose and --ablate: the ablation's rows are fixed settings; choose first, then "
                             "--set the chosen value")
        chosen = with_budget(resolve(suite, env), quick, budget)
        # The switches are the search settings they name, in every process, after --set (the test games are
        # played without ε all the same: quality.TEST_GAMES).
        from evoskill.platform.config import Settings

        switches = exploration_config(explore_epsilon, novelty, memory, Settings().search.memory_weight, curiosity,
                                      entropy_trigger)
        overrides = setting_overrides([*chosen.settings, *set_, *(f"search.{k}={v}" for k, v in switches.items())])
        agent_rows(chosen.pick(quick), rows)
        if library is not None and not library.is_file():
            raise ValueError(f"--library {library}: no such file")
        if rows_from and not ablate:
            raise ValueError("--rows-from: row records are the ablation's (--ablate)")
    # absolute, not resolved: a folder reached through a link stays under the working folder in the reports
    folder, reused = work_dir.absolute() / chosen.name.replace(":", "-"), library.absolute() if library else None
    if ablate:
        from evoskill.bench.ablation import run_ablation_bench
        from evoskill.core.errors import InvalidInput

        with _one_line_errors(InvalidInput):
            run_ablation_bench(chosen, quick, seeds, workers, overrides, folder.with_name(folder.name + "-ablate"),
                               json_path, reused, first_seed, [p.resolve() for p in rows_from])
        return
    run_quality_bench(chosen, quick, seeds, workers, overrides, folder, json_path, reused, rows, first_seed, choice)


@bench_app.command("combine")
def combine_cmd(
    files: list[str] = typer.Argument(..., help="`bench quality --json` summaries, PATH or PATH#policy,policy+mcts "
                                                "(only those agents' rows); pieces of one suite are merged."),
    family: str | None = typer.Option(None, help="scienceworld: the mean over its ten tasks, a task or agent no "
                                                 "file covers counted as 0."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the table and the means here."),
) -> None:
    """Several `bench quality` summaries as one table, with each agent's mean over the suites."""
    from rich.console import Console
    from rich.table import Table

    from evoskill.bench.combine import FAMILIES, combine, load
    from evoskill.platform.config import Settings
    from evoskill.platform.provenance import write_report

    with _one_line_errors(ValueError):
        if family is not None and family not in FAMILIES:
            raise ValueError(f"--family {family!r}: expected one of {', '.join(FAMILIES)}")
        result = combine(load(files), family)
    agents = list(result["mean"])
    table = Table("suite", "seeds", *agents, title="score mean ± sd over runs (the suite's own scale)")
    for row in result["suites"]:
        cells = [f"{a['score_mean']:.1f} ± {a['score_sd']:.1f}" if (a := row["agents"].get(name)) else "–"
                 for name in agents]
        seeds = sorted({seed for runs in row["seeds"].values() for seed in runs})
        table.add_row(row["suite"], ",".join(map(str, seeds)), *cells)
    means = [result["mean"][a] for a in agents]
    table.add_row(f"mean over {means[0]['suites'] if means else 0} suites", "",
                  *(f"{m['score_mean']:.1f}" + (f" ± {m['score_sd']:.1f}" if m["score_sd"] is not None else "")
                    for m in means), style="bold")
    console = Console()
    console.print(table)
    for agent, m in result["mean"].items():
        if m["counted_as_0"]:
            console.print(f"{agent}: counted as 0 where not measured: {', '.join(m['counted_as_0'])}")
    console.print(f"wall time of the runs: {result['wall_time_s'] / 3600:.1f} h")
    if json_path is not None:
        write_report(json_path, result, Settings())
        console.print(f"wrote {json_path}")


@bench_app.command("memory")
def memory(
    json_path: Path | None = typer.Option(None, "--json", help="Write the rows and ratios here."),
    sizes: Numbers = typer.Option("1000,10000,50000", parser=numbers(least=1), metavar="SIZES",
                                  help="Stored experiences at each measurement, increasing."),
    queries: int = typer.Option(300, min=1, help="Query texts per size (latency percentiles and recall over them)."),
    chosen: Engines = typer.Option("local,edge", "--engines", parser=engines, metavar="ENGINES",
                                   help="local (Qdrant local mode), edge (Qdrant Edge, if installed)."),
    work_dir: Path | None = typer.Option(None, help="Folder for the temporary stores (default: the system's)."),
    local_on_disk: bool = typer.Option(True, "--local-on-disk/--local-in-memory",
                                       help="Local mode persisted under a folder (as the service) or in memory."),
) -> None:
    """Memory store writes/s, retrieval p50/p99 and recall@10 against exact cosine, Qdrant local mode beside
    Qdrant Edge, at each size."""
    from evoskill.bench.memory import print_table, run_memory_bench  # qdrant and numpy only when run

    with _one_line_errors(ValueError):
        if Engine.LOCAL not in chosen:
            raise ValueError("--engines must include local (Qdrant Edge is measured beside it)")
        summary = run_memory_bench(json_path, sizes, queries, work_dir, list(chosen), local_on_disk=local_on_disk)
    print_table(summary)


@bench_app.command("memory-search")
def memory_search(
    env: str = typer.Option("twx:coin", help="The task family: its games are played one after another."),
    agent: AgentKind = typer.Option(AgentKind.MCTS, help="Who searches (mcts: uniform priors, no θ; policy and "
                                                         "policy+mcts: θ cloned from --library on each stack)."),
    seeds: int = typer.Option(3, min=1, help="Runs per mode; seed s plays games s×episodes onwards."),
    first_seed: int = typer.Option(0, min=0, help="The first run's seed (seeds first..first+seeds-1): runs of "
                                                  "one comparison split over several commands."),
    episodes: int = typer.Option(10, min=2, help="Games a round."),
    rounds: int = typer.Option(2, min=1, help="Times each run plays its games (after the first, the same tasks "
                                              "again: what the memory holds of them)."),
    simulations: int = typer.Option(8, min=1, help="MCTS simulations per step."),
    max_steps: int = typer.Option(30, min=1),
    set_: list[str] = typer.Option([], "--set", help="A setting for every process, e.g. search.memory_weight=2."),
    library: Path | None = typer.Option(None, exists=True, dir_okay=False,
                                        help="Gold paths (`evoskill demos --out`) θ is cloned on, for the agents "
                                             "that play θ."),
    gradient_steps: int = typer.Option(1000, min=1, help="Cloning steps on --library."),
    work_dir: Path = typer.Option(Path(".evoskill/bench/memory-search"), help="Stacks, reports and logs."),
    json_path: Path | None = typer.Option(None, "--json", help="Write the summary here."),
) -> None:
    """The same games with memory's advice off and on: success and environment steps side by side."""
    from evoskill.bench.memory_search import check_library, run_memory_search_bench
    from evoskill.bench.outer_loop import EvalArgs
    from evoskill.bench.quality import setting_overrides

    with _one_line_errors(ValueError):
        overrides = setting_overrides(set_)
        check_library(agent, library)
    run_memory_search_bench(EvalArgs(env, episodes, max_steps, 1), agent, simulations,
                            list(range(first_seed, first_seed + seeds)),
                            work_dir.resolve(), json_path, overrides, rounds,
                            library.resolve() if library else None, gradient_steps)


@bench_app.command("targets")
def targets(
    json_path: Path | None = typer.Option(None, "--json", help="Write the table here."),
    budgets: Numbers = typer.Option("4,8,16", parser=numbers(least=1), metavar="BUDGETS",
                                    help="Simulations per search, comma-separated."),
    seeds: int = typer.Option(200, min=1, help="Search seeds per row."),
) -> None:
    """θ's search targets at small budgets on toy games: PUCT's visit counts vs Gumbel MuZero's improved policy."""
    from evoskill.bench.search_targets import run_targets_bench

    run_targets_bench(json_path, budgets, seeds)
