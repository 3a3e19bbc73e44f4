"""The `evoskill` command line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

from evoskill.cli_choices import (
    AgentKind,
    Curiosity,
    EntropyTrigger,
    ExploreEpsilon,
    Fold,
    LlmModel,
    LlmUrl,
    Memory,
    Novelty,
    Service,
    exploration_config,
    output_file,
)
from evoskill.cli_support import console, err, fail, located_env, run_client, with_llm
from evoskill.core.errors import InvalidInput
from evoskill.platform.config import SERVICES, Settings, describe

app = typer.Typer(help="evoskill: tool-using agents that improve their own skills.", no_args_is_help=True)
class ConfigFormat(StrEnum):
    table = "table"
    yaml = "yaml"
    json = "json"


@app.command("config")
def config_cmd(
    output: Annotated[ConfigFormat, typer.Option("--format", help="table, or yaml/json (one entry per setting)")]
    = ConfigFormat.table,
    as_json: Annotated[bool, typer.Option("--json", help="as --format json")] = False,
) -> None:
    """Every setting with the value in effect (defaults < EVOSKILL_CONFIG_FILE < environment), where it came
    from, its default, the variable that sets it and its meaning; changed values are bold."""
    import json

    import yaml

    from evoskill.platform.config import config_file_data, source_of

    rows, data = describe(Settings()), config_file_data()
    entries = [{"name": r.name, "value": _plain(r.value), "source": source_of(r, data), "default": _plain(r.default),
                "variable": r.variable, "meaning": r.meaning} for r in rows]
    if as_json or output is ConfigFormat.json:
        print(json.dumps(entries, indent=1))
        return
    if output is ConfigFormat.yaml:
        print(yaml.safe_dump(entries, sort_keys=False, allow_unicode=True), end="")
        return
    table = Table("setting", "in effect", "from", "default", "variable", "meaning")
    for r, entry in zip(rows, entries, strict=True):
        changed = r.value != r.default
        value = _cell(entry["value"])
        table.add_row(r.name, f"[bold]{value}[/bold]" if changed else value, str(entry["source"]),
                      _cell(entry["default"]), r.variable, r.meaning)
    Console(width=max(console.width, 220)).print(table)  # never cut a setting's name


def _cell(value: object) -> str:
    """A value in the table as YAML and JSON write it (true, null, ["a"]), not as Python's repr (True, None)."""
    import json

    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _plain(value: object) -> object:
    """A setting as JSON and a person read it (paths and tuples as text and lists, not Python reprs)."""
    if isinstance(value, Path | SecretStr):
        return str(value)  # a secret shows masked, or empty when unset
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


@app.command()
def serve(service: Annotated[Service, typer.Argument()]) -> None:
    """Run one service in the foreground (what `evoskill up` starts for each service)."""
    from evoskill.platform.service import run_service

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s")
    asyncio.run(run_service(service, Settings()))


@app.command()
def health(service: Annotated[Service, typer.Argument()]) -> None:
    """Exit 0 when the service answers SERVING (container health checks)."""
    from evoskill.platform.rpc import check_health

    settings = Settings()
    ok = asyncio.run(check_health(settings.endpoint(service).target, settings=settings.grpc))
    raise typer.Exit(0 if ok else 1)


@app.command("nats-auth")
def nats_auth() -> None:
    """Print the nats-server `authorization` block for an external NATS: a user per service, named after it, allowed
    only the subjects it publishes and consumes. Each password is a variable the server reads from its environment
    (EVOSKILL_NATS_PASSWORD_<SERVICE>); give each service the same value as EVOSKILL_NATS__PASSWORD."""
    from evoskill.platform.nats_auth import authorization

    nats = Settings().nats
    print(authorization(nats.subject_prefix, nats.stream, SERVICES), end="")


def _print_endpoints(settings: Settings) -> None:
    from evoskill.stack.supervisor import read_state

    state = read_state(settings) or {"components": []}
    table = Table("component", "listens on", "pid", "log")
    for c in state["components"]:
        table.add_row(c["name"], c["address"], str(c["pid"]), c["log"] or "")
    if settings.nats.url:
        table.add_row("nats (external)", settings.nats.url, "", "")
    if settings.temporal.address:
        table.add_row("temporal (external)", settings.temporal.address, "", "")
    if settings.temporal_ui_url:
        table.add_row("temporal ui", settings.temporal_ui_url, "", "")
    table.add_row("qdrant", settings.qdrant.url or f"local mode: {settings.qdrant_path.resolve()}", "", "")
    console.print(table)
    if llm := state.get("llm"):
        console.print(f"the planner's LLM: {llm['base_url']} (model {llm['model'] or 'unnamed'})")


async def _start_stack(settings: Settings, replicas: dict[str, int] | None = None):  # type: ignore[no-untyped-def]
    from evoskill.stack.supervisor import Stack, StackError

    stack = Stack(settings, replicas=replicas or {})
    try:
        with console.status("starting nats-server, Temporal and the services…"):
            await stack.start()
    except StackError as exc:
        fail(str(exc))
    return stack


@app.command()
def up(
    detach: Annotated[bool, typer.Option(help="return once healthy; stop with `evoskill down`")] = False,
    replicas: Annotated[str, typer.Option(
        help="processes per service, e.g. sandbox=2,planner=2 (each on its own port; callers spread over them)",
    )] = "",
    headless: Annotated[bool, typer.Option("--headless", help="no Temporal UI (as temporal.ui_port=0)")] = False,
) -> None:
    """Start the embedded stack (nats-server, Temporal dev server with its UI, Qdrant local, every service)."""
    from evoskill.stack.supervisor import parse_replicas

    settings = Settings()
    if headless:
        settings = settings.model_copy(update={"temporal": settings.temporal.model_copy(update={"ui_port": 0})})
    try:
        counts = parse_replicas(replicas, settings) if replicas else {}
    except InvalidInput as exc:
        fail(str(exc), 2)
    if detach:
        _up_detached(settings, replicas)
        return
    # The supervisor's restarts go to its output (<state>/supervisor.log when detached).
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s supervisor %(levelname)s: %(message)s"))
    logging.getLogger("evoskill.stack").addHandler(handler)
    logging.getLogger("evoskill.stack").setLevel(logging.INFO)

    async def main() -> None:
        stack = await _start_stack(settings, counts)
        _print_endpoints(settings)
        console.print("[green]stack is up[/green]; Ctrl-C or `evoskill down` stops it")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        with console.status("stopping…"):
            stack.stop()
        console.print("stack stopped")

    asyncio.run(main())


def _up_detached(settings: Settings, replicas: str) -> None:
    from evoskill.stack.supervisor import LOCK_FILE, read_state

    state_dir = settings.state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "supervisor.log"
    argv = [sys.executable, "-m", "evoskill", "up", *(["--replicas", replicas] if replicas else []),
            *([] if settings.temporal.ui_port else ["--headless"])]
    with log_path.open("ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    # The supervisor waits stack.start_timeout_s for the services' health; this waits for it, a minute more.
    wait_s = settings.stack.start_timeout_s + 60
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            lines = log_path.read_text(errors="replace").strip().splitlines()
            line = next((ln for ln in reversed(lines) if "error" in ln.lower()), f"supervisor exited ({LOCK_FILE})")
            fail(line.split("error:", 1)[-1].strip())  # the supervisor's line already says "error:"
        state = read_state(settings)
        if state and state.get("supervisor_pid") == process.pid:
            _print_endpoints(settings)
            console.print(f"[green]stack is up[/green] (supervisor pid {process.pid}); `evoskill down` stops it")
            return
        time.sleep(0.5)
    # SIGINT, not SIGTERM: the starting supervisor stops what it started on an interrupt (Stack.start), and this
    # waits for that, so a retry does not find Qdrant's folder still locked by an orphaned memory service.
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=settings.stack.start_timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
    fail(f"the stack did not come up within {wait_s:.0f} s (stack.start_timeout_s + 60); see {log_path}")


@app.command()
def down(timeout: Annotated[float, typer.Option(min=0, help="seconds to wait for it to stop")] = 60.0) -> None:
    """Stop a stack started by `evoskill up` on this state folder."""
    from evoskill.stack.running import process_alive
    from evoskill.stack.supervisor import read_state

    settings = Settings()
    state = read_state(settings)
    if state is None:
        console.print("no stack is running on " + str(settings.state_dir.resolve()))
        return
    pid = int(state["supervisor_pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        # The supervisor died without cleaning up: stop what it left behind.
        for c in state["components"]:
            if c["pid"]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(c["pid"]), signal.SIGKILL)
        (settings.state_dir.resolve() / "stack.json").unlink(missing_ok=True)
        console.print("stack stopped (its supervisor had died)")
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (read_state(settings) is not None or process_alive(pid)):
        time.sleep(0.25)
    if read_state(settings) is not None or process_alive(pid):
        fail(f"the stack (supervisor pid {pid}) did not stop within {timeout:.0f} s")
    console.print("stack stopped")


@app.command()
def status() -> None:
    """Show each component's health and, for a stack started by `evoskill up`, its restarts and last exit."""
    from evoskill.stack.running import live_state
    from evoskill.stack.supervisor import component_health, running_settings

    settings = running_settings(Settings())
    rows = asyncio.run(component_health(settings))
    supervised = {c["address"]: c for c in (live_state(settings) or {"components": []})["components"]}
    table = Table("component", "address", "health", "restarts", "last exit")
    for name, address, ok in rows:
        c = supervised.get(address, {})
        health = "[green]SERVING[/green]" if ok else "[red]DOWN[/red]"
        if c.get("state", "running") != "running":
            health += f" ({c['state']})"
        table.add_row(name, address, health, str(c.get("restarts", "")), c.get("last_exit", ""))
    console.print(table)
    for c in supervised.values():
        if c.get("gave_up"):
            err.print(f"[red]{c['name']}[/red]: the stack {c['gave_up']}; see {c['log']}")
    raise typer.Exit(0 if all(ok for _, _, ok in rows) else 1)


@app.command()
def run() -> None:
    """The main job: bring the stack up, run the current job through Temporal, stop cleanly."""
    from evoskill.clients.jobs import run_main_job

    settings = Settings()

    async def main() -> int:
        stack = await _start_stack(settings)
        try:
            _print_endpoints(settings)
            return await run_main_job(settings, console)
        finally:
            with console.status("stopping the stack…"):
                stack.stop()
            console.print("stack stopped")

    raise typer.Exit(run_client(main))


@app.command()
def solve(
    env: Annotated[str, typer.Option(help="environment spec, e.g. twx:coin or 'twx:cookingworld?numLocations=1'")],
    seed: Annotated[int, typer.Option(min=0, help="the game (with --fold)")] = 0,
    fold: Fold = Fold.TEST,
    simulations: Annotated[int, typer.Option(min=1, help="MCTS simulations per step")] = 64,
    agent: Annotated[AgentKind, typer.Option(help="who plays (demo: the gold path)")] = AgentKind.MCTS,
    max_steps: Annotated[int, typer.Option(min=1)] = 50,
    policy: Annotated[str, typer.Option(help="θ version for the policy agents (empty = the serving one)")] = "",
    llm: LlmUrl = "",
    llm_model: LlmModel = "",
    explore_epsilon: ExploreEpsilon = None,
    novelty: Novelty = None,
    curiosity: Curiosity = None,
    entropy_trigger: EntropyTrigger = None,
    memory: Memory = None,
) -> None:
    """Play one episode through the services with a live progress display."""
    from rich.live import Live

    from evoskill.clients.episodes import services
    from evoskill.planner.client import episode_request, play

    env, configured = _play_setup(env, agent, policy, llm, llm_model)

    async def main() -> None:
        async with services(configured, console.print) as settings:
            await _check_policy(settings, policy)
            table = Table("step", "action", "visits", "reward", "score", title=f"{env} seed {seed} ({agent})")
            with Live(table, console=console, refresh_per_second=8):
                def show(update) -> None:  # type: ignore[no-untyped-def]
                    visits = max((s.visits for s in update.search.root), default=0) if update.HasField("search") else 0
                    if update.action:
                        table.add_row(str(update.step_index), update.action, str(visits),
                                      f"{update.total_reward:.2f}", f"{update.observation.score:.2f}")

                switches = exploration_config(explore_epsilon, novelty, memory, settings.search.memory_weight,
                                              curiosity, entropy_trigger)
                request = episode_request(env, seed, fold, agent, simulations, max_steps, policy_version=policy,
                                          **switches)
                outcome = await play(settings, request, show)
            console.print(f"[bold]{'won' if outcome.won else 'not won'}[/bold] · score {outcome.score:.2f} · "
                          f"{outcome.steps} steps · {outcome.env_steps} environment steps")

    run_client(main)


@app.command("eval")
def eval_cmd(
    env: Annotated[str, typer.Option(help="environment spec")],
    agent: Annotated[AgentKind, typer.Option(help="who plays (demo: the gold path)")] = AgentKind.MCTS,
    fold: Fold = Fold.TEST,
    episodes: Annotated[int, typer.Option(min=1)] = 20,
    simulations: Annotated[int, typer.Option(min=1, help="MCTS simulations per step")] = 64,
    max_steps: Annotated[int, typer.Option(min=1)] = 50,
    seed_offset: Annotated[int, typer.Option(min=0, help="the first game's seed (then one more each)")] = 0,
    policy: Annotated[str, typer.Option(help="θ version for the policy agents (empty = the serving one)")] = "",
    parallel: Annotated[int, typer.Option(min=1, help="episodes played at once")] = 1,
    json_path: Annotated[Path | None, typer.Option("--json", callback=output_file, help="write the report here")]
    = None,
    llm: LlmUrl = "",
    llm_model: LlmModel = "",
    explore_epsilon: ExploreEpsilon = None,
    novelty: Novelty = None,
    curiosity: Curiosity = None,
    entropy_trigger: EntropyTrigger = None,
    memory: Memory = None,
) -> None:
    """Play many episodes and print success rate, mean score and environment steps."""
    import uuid

    import grpc
    from rich.progress import Progress

    from evoskill.clients.episodes import EvalReport, services
    from evoskill.planner.client import EpisodeOutcome, episode_request, play
    from evoskill.platform.provenance import write_report

    env, configured = _play_setup(env, agent, policy, llm, llm_model)
    refused: list[str] = []  # a bad-request answer: the whole evaluation is void
    written: list[Path] = []

    async def main() -> None:
        async with services(configured, console.print) as settings:
            await _check_policy(settings, policy)
            switches = exploration_config(explore_epsilon, novelty, memory, settings.search.memory_weight,
                                          curiosity, entropy_trigger)
            report = EvalReport(env, agent, fold, simulations, [],
                                {"search": settings.search.model_dump() | {"num_simulations": simulations, **switches},
                                 "max_steps": max_steps, "policy": policy},  # what the planner was asked to use
                                budget={"episodes": episodes, "simulations": simulations, "max_steps": max_steps,
                                        "parallel": parallel},
                                seeds=list(range(seed_offset, seed_offset + episodes)))
            run = uuid.uuid4().hex[:8]  # episode ids of this evaluation: eval-<run>-<seed>
            played: dict[int, EpisodeOutcome] = {}

            def write() -> None:
                if json_path is None:
                    return
                used = settings.search.model_copy(update={"num_simulations": simulations,
                                                          "max_episode_steps": max_steps, **switches})
                write_report(json_path, report.to_json(), settings.model_copy(update={"search": used}))
                written.append(json_path)
                console.print(f"wrote {json_path} (each episode's id and trace id: `evoskill trace --episode ID`)")

            slots = asyncio.Semaphore(parallel)
            with Progress(console=console) as progress:
                task = progress.add_task(f"{agent} on {env}", total=episodes)

                async def one(seed: int) -> EpisodeOutcome:
                    async with slots:
                        request = episode_request(env, seed, fold, agent, simulations, max_steps,
                                                  policy_version=policy, **switches)
                        request.episode_id = f"eval-{run}-{seed}"
                        try:
                            outcome = await play(settings, request)
                        except grpc.aio.AioRpcError as exc:  # one failed episode does not void the others
                            outcome = EpisodeOutcome(seed, False, 0.0, 0, 0, 0.0,
                                                     error=f"{exc.code().name}: {exc.details()}",
                                                     episode_id=request.episode_id)
                            console.print(f"seed {seed}: {outcome.error}")
                            if exc.code().name in BAD_REQUEST_CODES:
                                refused.append(outcome.error)
                        progress.advance(task)
                        played[seed] = outcome
                        return outcome

                try:
                    report.episodes = list(await asyncio.gather(*(one(seed) for seed in report.seeds)))
                except asyncio.CancelledError:  # Ctrl-C: the episodes already played are kept
                    report.episodes = [played[seed] for seed in report.seeds if seed in played]
                    report.interrupted = True
                    write()
                    raise
        table = Table("env", "agent", "fold", "episodes", "simulations", "success", "mean score", "mean env steps",
                      "planner share")
        table.add_row(env, agent, fold, str(len(report.episodes)), str(simulations), f"{report.success_rate:.0%}",
                      f"{report.mean_score:.3f}", f"{report.mean_env_steps:.0f}", f"{report.planner_share:.0%}")
        console.print(table)
        write()
        if refused:
            fail(f"{len(refused)} episode(s) were refused as bad requests, e.g. {refused[0]}")
        if errors := sum(bool(e.error) for e in report.episodes):  # a script must not read a broken run as a score
            fail(f"{errors} of {len(report.episodes)} episode(s) failed in the services (counted as lost, score 0); "
                 "see the errors above")

    try:
        run_client(main)
    except KeyboardInterrupt:
        fail(f"interrupted: the episodes played so far are in {written[0]}" if written else "interrupted", 130)


@app.command("envs")
def envs_cmd() -> None:
    """List the environments a spec can select, every scheme's (those of installed plug-ins too)."""
    from evoskill.envs import describe_environments

    console.print(describe_environments(), markup=False, highlight=False, soft_wrap=True)


# An answer that means the request was wrong, not that the agent lost: eval exits non-zero. (A session lost
# mid-episode answers NOT_FOUND: a service failure, counted as a lost episode; if all fail, eval exits 1.)
BAD_REQUEST_CODES = ("INVALID_ARGUMENT",)


def _play_setup(env: str, agent: AgentKind, policy: str, llm: str, llm_model: str) -> tuple[str, Settings]:
    """`solve`'s and `eval`'s `--env` as the services read it and the settings they start with (`--llm`), once
    their options are checked, before anything starts. `--policy` with an agent that plays no policy would be
    ignored: one line and exit 2 instead."""
    env = located_env(env)
    if policy and not agent.uses_policy:
        fail(f"--policy {policy}: --agent {agent} plays no policy (policy and policy+mcts do)", 2)
    return env, with_llm(Settings(), llm, llm_model)


async def _check_policy(settings: Settings, policy: str) -> None:
    """`--policy` names a version the learner published, else one line and exit 2 before any episode is played
    (each would fail the same way)."""
    from evoskill.clients import episodes

    if not policy:
        return
    published = await episodes.published_policies(settings)
    if policy not in published:
        listed = ", ".join(published[-5:]) if published else "none yet (`evoskill train` or `library train`)"
        fail(f"--policy {policy!r} is not published; the learner has {listed}", 2)


def _mount_optional() -> None:
    from evoskill.explore_cli import explore
    from evoskill.export_cli import export
    from evoskill.library.cli import demos, library_app
    from evoskill.memory_cli import memory_app
    from evoskill.runs_cli import runs_app
    from evoskill.trace_cli import trace
    from evoskill.train_cli import train

    app.command("train")(train)
    app.command("explore")(explore)
    app.command("demos")(demos)
    app.command("export")(export)
    app.add_typer(library_app, name="library")
    app.add_typer(runs_app, name="runs")
    app.add_typer(memory_app, name="memory")
    app.command("trace")(trace)
    with contextlib.suppress(ImportError):
        from evoskill.bench import bench_app

        app.add_typer(bench_app, name="bench", help="Benchmarks (planner, pipeline, outer-loop).")


_mount_optional()


def _temporal_connections() -> int:
    """The Temporal clients this process has made so far (none where it never loaded the client's module)."""
    module = sys.modules.get("evoskill.platform.temporal")
    return module.connections() if module is not None else 0


def main() -> None:
    """The console entry point: a usage mistake is one line and exit 2, a settings mistake one line per setting
    and exit 2, not a traceback or a box."""
    from pydantic import ValidationError

    # Typer vendors its click (0.29 pinned): its exceptions, not the `click` package's, reach here.
    from typer import Abort
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

    from evoskill.platform.config import ConfigFileError, explain

    clients_before = _temporal_connections()
    try:
        code = app(standalone_mode=False)  # usage errors come here: one line, not click's box
    except NoArgsIsHelpError as exc:
        err.print(exc.format_message(), highlight=False, markup=False)
        sys.exit(2)
    except UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "evoskill"
        # A declared choice's refusal comes through pydantic in typer 0.29: "…: Value error, 'x' is not one of …".
        message = exc.format_message().replace(": Value error, ", ": ")
        err.print(f"[red]error:[/red] {message} (see `{where} --help`)", highlight=False)
        sys.exit(2)
    except ClickException as exc:
        err.print(f"[red]error:[/red] {exc.format_message()}", highlight=False)
        sys.exit(exc.exit_code)
    except Abort:
        err.print("aborted")
        sys.exit(130)
    except ValidationError as exc:
        for line in explain(exc):
            err.print(f"[red]error:[/red] {line}")
        sys.exit(2)
    except ConfigFileError as exc:
        err.print(f"[red]error:[/red] {exc}")
        sys.exit(2)
    if _temporal_connections() > clients_before:  # a client's threads must not outlive the interpreter
        from evoskill.platform.temporal import exit_process

        exit_process(code if isinstance(code, int) else 0)
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
