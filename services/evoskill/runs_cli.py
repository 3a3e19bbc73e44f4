"""`evoskill runs list|show|pause|resume|stop|attach` and `evoskill train --detach`: training runs on the stack's
Temporal, as `temporal workflow …` would show them (the client side is evoskill.clients.runs, imported when a
command runs so that `evoskill --help` does not load Temporal's client)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from evoskill.platform.config import Settings

if TYPE_CHECKING:
    from evoskill.orchestrator.training.logic import TrainingParams

runs_app = typer.Typer(help="Training runs (TrainingWorkflows) on the stack's Temporal: list, show, pause, resume, "
                            "stop, attach.", no_args_is_help=True)
RunId = Annotated[str, typer.Argument(help="the run's workflow id, as `evoskill runs list` shows it")]


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """A command's body: a bad run id or an absent stack ends in one line and a non-zero status."""
    from temporalio.service import RPCError

    from evoskill.cli_support import fail
    from evoskill.clients.runs import RunsError

    try:
        asyncio.run(main())
    except RunsError as exc:
        fail(str(exc), exc.code)
    except RPCError as exc:
        fail(f"Temporal answered {exc.status.name}: {exc.message}")


@runs_app.command("list")
def list_cmd(
    limit: Annotated[int, typer.Option(min=1, help="the most recently started runs shown")] = 20,
    running: Annotated[bool, typer.Option("--running", help="only runs still running")] = False,
) -> None:
    """The training runs, newest first: id, status, start time and, while one runs, its epoch and episodes."""
    from evoskill.cli_support import console
    from evoskill.clients.runs import WORKFLOW_TYPE, client_for, list_runs, shown_status

    settings = Settings()

    async def main() -> None:
        runs = await list_runs(await client_for(settings), limit, running)
        if not runs:
            console.print(f"no training runs on {settings.temporal_address}")
            return
        table = Table("run", "type", "status", "started", "epoch", "episodes", "task queue")
        for r in runs:
            p = r.progress
            table.add_row(r.run_id, WORKFLOW_TYPE, shown_status(r.status, p),
                          r.started.astimezone().strftime("%Y-%m-%d %H:%M:%S") if r.started else "",
                          f"{p.epoch} of 0–{p.epochs - 1} ({p.phase})" if p else "",
                          str(p.episodes_played) if p else "", r.task_queue)
        console.print(table)

    _run(main)


@runs_app.command()
def show(run_id: RunId) -> None:
    """One run: its status, parameters and the per-epoch results so far."""
    from evoskill.cli_support import console
    from evoskill.clients.runs import client_for, find, params_of, shown_status, status_name
    from evoskill.clients.training import query_progress
    from evoskill.orchestrator.training.report import epoch_table, progress_table

    settings = Settings()

    async def main() -> None:
        client = await client_for(settings)
        run, status = await find(client, run_id)
        params, progress = await params_of(client, run), await query_progress(run)
        console.print(f"[bold]{run_id}[/bold]: {shown_status(status_name(status), progress)}")
        console.print(_params_table(params))
        if progress is None:
            console.print("no orchestrator worker answered the progress query (is `evoskill status` all SERVING?); "
                          "the per-epoch results show once one does")
            return
        console.print(progress_table(progress))
        console.print(epoch_table(progress.history, title=f"epochs of {run_id}") if progress.history
                      else "no epoch finished yet")

    _run(main)


def _params_table(params: TrainingParams) -> Table:
    table = Table("parameter", "value", title="parameters")
    for name, value in asdict(params).items():
        table.add_row(name, ", ".join(value) if isinstance(value, list) else str(value))
    return table


@runs_app.command()
def pause(run_id: RunId) -> None:
    """No new episode starts until `evoskill runs resume` (those playing finish)."""
    _signal(run_id, "pause", f"paused: no new episode starts until `evoskill runs resume {run_id}`")


@runs_app.command()
def resume(run_id: RunId) -> None:
    """Play on after `evoskill runs pause`."""
    _signal(run_id, "resume", "resumed")


@runs_app.command()
def stop(
    run_id: RunId,
    now: Annotated[bool, typer.Option("--now", help="cancel at once: the epoch under way is lost, no report")]
    = False,
) -> None:
    """End the run after the current epoch (as Ctrl-C in `evoskill train`), or cancel it at once with --now."""
    if now:
        _signal(run_id, "cancel", "cancel requested: the run ends now")
    else:
        _signal(run_id, "stop", "stop requested: the run ends after the current epoch")


def _signal(run_id: str, name: str, said: str) -> None:
    from evoskill.cli_support import console
    from evoskill.clients.runs import client_for, signal

    settings = Settings()

    async def main() -> None:
        await signal(await client_for(settings), run_id, name)
        console.print(f"{run_id}: {said}")

    _run(main)


@runs_app.command()
def attach(
    run_id: RunId,
    report_dir: Annotated[Path | None, typer.Option(help="default: <state>/reports/<run id>")] = None,
) -> None:
    """Follow a run live as `evoskill train` does, then write its report. Ctrl-C stops following, not the run."""
    from temporalio.client import WorkflowFailureError

    from evoskill.cli_support import console, fail
    from evoskill.clients.runs import RunsError, client_for, find, params_of
    from evoskill.clients.training import failure_message, follow, write_report

    settings = Settings()
    folder = report_dir or settings.state_dir / "reports" / run_id

    async def main() -> None:
        client = await client_for(settings)
        run, _ = await find(client, run_id)
        params = await params_of(client, run)
        try:
            result = await follow(run, console, folder, stop_on_interrupt=False)
        except WorkflowFailureError as exc:
            raise RunsError(f"run {run_id} ended without a result: {failure_message(exc)}") from exc
        write_report(result, folder, console, params, settings=settings)

    try:
        _run(main)
    except KeyboardInterrupt:
        fail(f"stopped following; the run goes on (`evoskill runs attach {run_id}` follows it again)", 130)


def detach(settings: Settings, params: TrainingParams, workflow_id: str | None) -> None:
    """`evoskill train --detach`: the run id alone on stdout (`RUN=$(evoskill train --detach …)`), how to follow
    it on stderr."""
    from evoskill.cli_support import err
    from evoskill.clients.runs import start_detached

    async def main() -> None:
        run_id = await start_detached(settings, params, workflow_id, err.print)
        print(run_id)
        err.print(f"training run {run_id} started: `evoskill runs attach {run_id}` follows it, "
                  f"`evoskill runs show {run_id}` shows it")

    _run(main)
