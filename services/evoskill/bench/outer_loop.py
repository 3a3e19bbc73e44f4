"""Outer-loop benchmark: does training θ pay off? The whole protocol of the issue as one command.

Per training seed, a fresh embedded stack (own state folder and ports, so a fresh learner, replay and
registry) runs `evoskill train`, then evaluates the last θ on the test fold twice: with search
(`policy+mcts` at `--simulations`) and alone (`policy`, greedy). Then one more stack plays the
baselines on the same test games: random, uniform-prior MCTS at the same simulations and at
`--baseline-multiple` times as many. Every figure is a subprocess of the public CLI, so the numbers
are exactly what `evoskill train` / `evoskill eval` print; their JSON reports stay under `--work-dir`.

    evoskill bench outer-loop --env twx:coin --seeds 0,1,2 --simulations 4 --json outer-loop-coin.json

(the training budget is `--train-args`, passed to `evoskill train` as is).

Printed: success and mean score per agent (per seed, mean ± sd over seeds), the held-out reward of the
first and last epoch per seed, and the three comparisons the issue asks for.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from evoskill.core.agent import AgentKind
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report
from evoskill.stack.supervisor import free_ports, port_is_free

SERVICES = ("sandbox", "reward", "memory", "planner", "learner", "orchestrator")
UP_TRIES = 3  # starts of one bench stack, when another process takes one of its ports first


@dataclass
class EvalArgs:
    env: str
    episodes: int
    max_steps: int
    parallel: int


@dataclass
class AgentRow:
    agent: str
    simulations: int  # 0: no search
    success: list[float] = field(default_factory=list)  # one per training seed (one value for baselines)
    score: list[float] = field(default_factory=list)
    env_steps: list[float] = field(default_factory=list)  # mean environment steps per episode, search included
    steps: list[float] = field(default_factory=list)  # mean real steps per episode
    planner_share: list[float] = field(default_factory=list)  # the planner's own share of episode wall time
    errors: list[int] = field(default_factory=list)  # episodes the services could not finish (counted as lost)
    walks_back: list[float] = field(default_factory=list)  # mean entries a game into a place entered before

    def record(self, report: dict[str, Any]) -> None:
        """One evaluation's figures (an `evoskill eval --json` report)."""
        self.success.append(report["success_rate"])
        self.score.append(report["mean_score"])
        self.env_steps.append(report["mean_env_steps"])
        self.steps.append(report.get("mean_steps", 0.0))
        self.planner_share.append(report.get("planner_share", 0.0))
        self.errors.append(report.get("errors", 0))
        if "walks_back" in report:  # reports before it was counted say nothing, not zero
            self.walks_back.append(report["walks_back"] / max(len(report.get("episodes", ())), 1))

    def mean_sd(self, values: list[float]) -> tuple[float, float]:
        return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _cli(*args: str, env: dict[str, str], log: Path) -> int:
    """`evoskill ARGS` in a subprocess with the stack's settings; its output goes to `log`. Returns 1 for an eval
    whose report counts episodes the services could not finish (kept in the row's `errors`)."""
    with log.open("a") as out:  # each command timed: where a bench's hours went, from its log alone
        out.write(f"[{time.strftime('%H:%M:%S')}] $ evoskill {shlex.join(args)}\n")
        out.flush()
        started = time.perf_counter()
        code = run_interruptible([sys.executable, "-m", "evoskill.cli", *args], env, out)
        out.write(f"[{time.strftime('%H:%M:%S')}] evoskill {args[0]}: exit {code} after "
                  f"{time.perf_counter() - started:.1f} s\n")
    failed_episodes = code == 1 and args[0] == "eval"
    if code != 0 and not failed_episodes:
        raise RuntimeError(f"evoskill {args[0]} failed (exit {code}); see {log}")
    return code


def _hear_sigint() -> None:
    """In the child before exec: SIGINT back to its default, so that Python makes it a KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_interruptible(command: list[str], env: dict[str, str], out: IO[str], grace_s: float = 60.0) -> int:
    """Run `command` to its end; interrupted (Ctrl-C, or SIGTERM under `terminated_as_interrupt`), pass it a
    SIGINT and give it `grace_s` to stop as after Ctrl-C (an eval writes the episodes it played) before the
    kill `subprocess.run` would have sent at once. The child hears SIGINT even where we were started with it
    ignored (`nohup … &`: a shell without job control has background jobs ignore it, and children inherit that)."""
    child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_hear_sigint)
    try:
        return child.wait()
    except KeyboardInterrupt:
        try:
            child.wait(timeout=1.0)  # a Ctrl-C at a terminal reached the child too
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        raise


@contextlib.contextmanager
def stack(folder: Path, settings: dict[str, str] | None = None, fresh: bool = True) -> Iterator[dict[str, str]]:
    """An embedded stack on `folder` and free ports, with `settings` (environment variables) on top of ours;
    yields the environment that reaches it. `fresh`: the folder is emptied first; otherwise the stack starts
    again on what an earlier one left there (its θ versions, replay, memory)."""
    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "bench.log"
    with terminated_as_interrupt():
        env = _up(folder, settings or {}, log)
        try:
            yield env
        finally:
            _cli("down", env=env, log=log)


def _up(folder: Path, settings: dict[str, str], log: Path, tries: int = UP_TRIES) -> dict[str, str]:
    """`evoskill up` on free ports; the environment that reaches the stack. The ports are free when chosen, not
    held until the servers bind them: another stack starting at the same time can take one first. A start that
    fails with one of its ports held by someone else is tried again on other ports."""
    for attempt in range(1, tries + 1):
        ports = free_ports(2 + len(SERVICES))
        nats, temporal, *services = ports
        env = dict(os.environ, **settings, EVOSKILL_STATE_DIR=str(folder), EVOSKILL_NATS__PORT=str(nats),
                   EVOSKILL_TEMPORAL__PORT=str(temporal), EVOSKILL_TEMPORAL__UI_PORT="0")
        for name, port in zip(SERVICES, services, strict=True):
            env[f"EVOSKILL_{name.upper()}_ENDPOINT__PORT"] = str(port)
        try:
            _cli("up", "--detach", env=env, log=log)
            return env
        except RuntimeError:
            _cli("down", env=env, log=log)
            taken = [p for p in ports if not port_is_free("127.0.0.1", p)]
            if attempt == tries or not taken:
                raise
            with log.open("a") as out:
                out.write(f"ports {taken} were taken by another process while the stack started; "
                          f"trying again on others ({attempt + 1} of {tries})\n")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM (a job's timeout, `kill`) raises KeyboardInterrupt here, as Ctrl-C does, so the stack's `down` in
    the `finally` above runs: by default it ends Python at once and leaves the stack's processes running.
    The subprocess being waited for is killed by `subprocess.run` on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def evaluate(args: EvalArgs, agent: str, simulations: int, env: dict[str, str], out: Path,
             policy: str = "", extra: Sequence[str] = ()) -> dict[str, Any]:
    cmd = ["eval", "--env", args.env, "--agent", agent, "--episodes", str(args.episodes), "--max-steps",
           str(args.max_steps), "--parallel", str(args.parallel), "--simulations", str(max(simulations, 1)),
           "--json", str(out)]
    if policy:
        cmd += ["--policy", policy]
    cmd += extra
    log = out.parent / "bench.log"
    code = _cli(*cmd, env=env, log=log)
    report: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    if code and not 0 < report.get("errors", 0) < len(report.get("episodes", [])):  # only some failed: kept
        raise RuntimeError(f"evoskill eval failed (exit {code}); see {log}")
    return report


def reused_baselines(path: Path, args: EvalArgs, simulations: int, baseline_multiple: int) -> list[AgentRow]:
    """The baseline rows of an earlier run's summary, if it played the same test games with the same budgets
    (the baselines do not depend on θ, and they are the slowest part on CookingWorld)."""
    old = json.loads(path.read_text())
    want = {"env": args.env, "test_episodes": args.episodes, "max_steps": args.max_steps}
    got = {k: old.get(k) for k in want}
    sims = [row["simulations"] for row in old["agents"][:3]]
    if got != want or sims != [0, simulations, simulations * baseline_multiple]:
        raise ValueError(f"{path} measured other baselines: {got}, simulations {sims}; this run needs {want}, "
                         f"simulations {[0, simulations, simulations * baseline_multiple]}")
    return [AgentRow(row["agent"], row["simulations"], row["success"], row["score"]) for row in old["agents"][:3]]


def run_outer_loop_bench(args: EvalArgs, seeds: list[int], simulations: int, baseline_multiple: int,
                         train_args: str, work_dir: Path, json_path: Path | None,
                         baselines_from: Path | None = None) -> dict[str, Any]:
    # Redirected to a file, rich would wrap the tables at 80 columns; a log should keep them whole.
    console = Console() if sys.stdout.isatty() else Console(width=140)
    theta_search = AgentRow("θ + MCTS (policy+mcts)", simulations)
    theta_alone = AgentRow("θ alone (policy, greedy)", 0)
    curves: dict[int, list[float]] = {}
    for seed in seeds:
        folder = work_dir / f"seed-{seed}"
        console.print(f"[bold]seed {seed}[/]: training on a fresh stack under {folder}")
        with stack(folder) as env:
            report_dir = folder / "report"
            _cli("train", "--env", args.env, *shlex.split(train_args), "--seed", str(seed), "--workflow-id",
                 f"outer-loop-{seed}", "--report-dir", str(report_dir), env=env, log=folder / "bench.log")
            report = json.loads((report_dir / "report.json").read_text())
            curves[seed] = [float(h["eval_mean_reward"]) for h in report["history"]]
            version = str(report["policy_version"])
            for row, agent in ((theta_search, AgentKind.POLICY_MCTS), (theta_alone, AgentKind.POLICY)):
                row.record(evaluate(args, agent, row.simulations, env, folder / f"eval-{agent}.json", version))
            console.print(f"  θ {version}: with search {theta_search.success[-1]:.0%}, "
                          f"alone {theta_alone.success[-1]:.0%}")

    if baselines_from is not None:
        baselines = reused_baselines(baselines_from, args, simulations, baseline_multiple)
        console.print(f"[bold]baselines[/] from {baselines_from}")
    else:
        baselines = play_baselines(args, simulations, baseline_multiple, work_dir / "baselines", console)

    result = summary(args, seeds, [*baselines, theta_search, theta_alone], curves, train_args)
    show(console, result)
    if json_path is not None:
        write_report(json_path, result, Settings())
        console.print(f"wrote {json_path}")
    return result


def play_baselines(args: EvalArgs, simulations: int, baseline_multiple: int, folder: Path,
                   console: Console) -> list[AgentRow]:
    baselines = [AgentRow("random", 0), AgentRow("uniform-prior MCTS", simulations),
                 AgentRow("uniform-prior MCTS", simulations * baseline_multiple)]
    console.print(f"[bold]baselines[/] on a fresh stack under {folder}")
    with stack(folder) as env:
        play_baseline_rows(args, baselines, env, folder)
    return baselines


def play_baseline_rows(args: EvalArgs, rows: list[AgentRow], env: dict[str, str], folder: Path,
                       extra: Sequence[str] = ()) -> None:
    """Random (a row of 0 simulations) and uniform-prior MCTS rows on the stack `env` reaches."""
    for row in rows:
        agent = AgentKind.RANDOM if row.simulations == 0 else AgentKind.MCTS
        row.record(evaluate(args, agent, row.simulations, env, folder / f"eval-{agent}-{row.simulations}.json",
                            extra=extra))


def summary(args: EvalArgs, seeds: list[int], rows: list[AgentRow], curves: dict[int, list[float]],
            train_args: str) -> dict[str, Any]:
    random_row, uniform_same, uniform_more, theta_search, theta_alone = rows
    out: dict[str, Any] = {
        "env": args.env, "test_episodes": args.episodes, "max_steps": args.max_steps, "seeds": seeds,
        "train_args": train_args, "agents": [], "curves": {str(s): c for s, c in curves.items()},
    }
    for row in rows:
        (success, success_sd), (score, score_sd) = row.mean_sd(row.success), row.mean_sd(row.score)
        out["agents"].append({"agent": row.agent, "simulations": row.simulations, "success": row.success,
                              "score": row.score, "success_mean": success, "success_sd": success_sd,
                              "score_mean": score, "score_sd": score_sd, "failed_episodes": sum(row.errors)})
    mean = statistics.fmean
    out["comparisons"] = {
        "theta_search_minus_uniform_same_sims": mean(theta_search.success) - mean(uniform_same.success),
        "theta_search_minus_uniform_more_sims": mean(theta_search.success) - mean(uniform_more.success),
        "theta_search_score_minus_uniform_same_sims": mean(theta_search.score) - mean(uniform_same.score),
        "theta_alone_minus_random": mean(theta_alone.success) - mean(random_row.success),
        "theta_alone_score_minus_random": mean(theta_alone.score) - mean(random_row.score),
        "curve_rises_in_seeds": sum(1 for c in curves.values() if len(c) > 1 and c[-1] > c[0]),
    }
    return out


def show(console: Console, result: dict[str, Any]) -> None:
    table = Table(title=f"{result['env']}: {result['test_episodes']} test games, seeds {result['seeds']}")
    for column in ("agent", "simulations", "success per seed", "success mean ± sd", "score mean ± sd"):
        table.add_column(column)
    for row in result["agents"]:
        table.add_row(row["agent"], str(row["simulations"] or "–"), " / ".join(f"{s:.0%}" for s in row["success"]),
                      f"{row['success_mean']:.0%} ± {row['success_sd']:.0%}",
                      f"{row['score_mean']:.3f} ± {row['score_sd']:.3f}")
    console.print(table)
    curves = Table(title="held-out reward per epoch")
    curves.add_column("seed")
    curves.add_column("first")
    curves.add_column("last")
    curves.add_column("last > first")
    for seed, curve in result["curves"].items():
        curves.add_row(seed, f"{curve[0]:.3f}", f"{curve[-1]:.3f}", "yes" if curve[-1] > curve[0] else "no")
    console.print(curves)
    c = result["comparisons"]
    console.print(f"θ+MCTS − uniform MCTS, same simulations: {c['theta_search_minus_uniform_same_sims']:+.0%} success, "
                  f"{c['theta_search_score_minus_uniform_same_sims']:+.3f} score")
    console.print(f"θ+MCTS − uniform MCTS with {result['agents'][2]['simulations']} simulations: "
                  f"{c['theta_search_minus_uniform_more_sims']:+.0%} success")
    console.print(f"θ alone − random: {c['theta_alone_minus_random']:+.0%} success, "
                  f"{c['theta_alone_score_minus_random']:+.3f} score")
    console.print(f"held-out reward rises (last epoch > first) in {c['curve_rises_in_seeds']} "
                  f"of {len(result['curves'])} seeds")
