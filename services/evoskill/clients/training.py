"""The client side of a training run: start the TrainingWorkflow, show its progress live, write the report.

Used by `evoskill train` and by the main job of `evoskill run`. Progress comes from the workflow's
`progress` query, polled; each finished epoch is also written as TensorBoard scalars under the report folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.text import Text
from temporalio.client import WorkflowHandle, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from evoskill.orchestrator.training.logic import (
    EpochMetrics,
    TrainingParams,
    TrainingProgress,
    TrainingResult,
)
from evoskill.orchestrator.training.report import (
    describe_plan,
    epoch_scalars,
    epoch_table,
    plot_curves,
    progress_table,
    success_line,
    write_scalars,
)
from evoskill.orchestrator.training.starter import start_training
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report as write_json_report
from evoskill.platform.temporal import workflow_id as new_id


def failure_message(exc: BaseException) -> str:
    """The first application error in the chain (the activity's own message), not Temporal's wrappers."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = getattr(cause, "cause", None)
    return cause.message if isinstance(cause, ApplicationError) else str(exc)


async def follow(handle: WorkflowHandle[TrainingWorkflow, TrainingResult], console: Console, report_dir: Path,
                 poll_s: float = 1.0, stop_on_interrupt: bool = True) -> TrainingResult:
    """Show the progress query until the workflow ends; Ctrl-C once asks it to stop after the epoch (with
    `stop_on_interrupt`; else Ctrl-C interrupts the command and the run goes on)."""
    result = asyncio.ensure_future(_result(handle))
    logged = 0
    loop = asyncio.get_running_loop()
    signals: list[asyncio.Future[None]] = []

    def ask_stop() -> None:
        console.print("[yellow]stop requested: the run ends after the current epoch[/yellow]")
        signals.append(asyncio.ensure_future(handle.signal(TrainingWorkflow.stop)))
        loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C interrupts the command

    if stop_on_interrupt:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, ask_stop)
    try:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            while not result.done():
                progress = await query_progress(handle)
                if progress is None:
                    live.update(Text("waiting for an orchestrator worker to answer (is `evoskill status` all "
                                     "SERVING?)…"))
                else:
                    live.update(progress_table(progress))
                    logged = _log_epochs(report_dir, progress.history, logged)
                await asyncio.wait({result}, timeout=poll_s)
            final = await query_progress(handle)
            if final is not None:
                live.update(progress_table(final))
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    outcome = await result
    _log_epochs(report_dir, outcome.history, logged)
    return outcome


async def _result(handle: WorkflowHandle[TrainingWorkflow, TrainingResult]) -> TrainingResult:
    """The workflow's result, waiting through the server's transient failures: a Temporal dev server on two
    loaded cores can fail the long poll for the history with DEADLINE_EXCEEDED while the run goes on."""
    while True:
        try:
            return await handle.result()
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE):
                raise
            await asyncio.sleep(1.0)


async def query_progress(handle: WorkflowHandle[TrainingWorkflow, TrainingResult]) -> TrainingProgress | None:
    """The progress, or None while no worker can answer (starting, restarting, between runs)."""
    try:
        return await handle.query(TrainingWorkflow.progress, rpc_timeout=timedelta(seconds=5))
    except (RPCError, WorkflowQueryFailedError):
        return None


def _log_epochs(report_dir: Path, history: list[EpochMetrics], logged: int) -> int:
    for metrics in history[logged:]:
        write_scalars(report_dir, metrics.epoch, epoch_scalars(metrics))
    return max(logged, len(history))


def write_report(result: TrainingResult, report_dir: Path, console: Console, params: TrainingParams | None = None,
                 wall_time_s: float | None = None, *, settings: Settings) -> Path:
    """Curves as PNG, the whole result as JSON (with the run's parameters: environments, budget, seed; its wall
    time from start to result, where given; and what ran: `provenance.run_record`), and the per-epoch table on
    the console."""
    console.print()  # the live display may leave the cursor at the end of its last line
    extra = {"params": asdict(params) if params else None, "wall_time_s": wall_time_s}
    write_json_report(report_dir / "report.json", {**asdict(result), **extra}, settings)
    png = plot_curves(result.history, report_dir / "curves.png")
    console.print(epoch_table(result.history, title=f"training {result.workflow_id}"))
    if any(m.eval_episodes for m in result.history):
        console.print(success_line(result.history))
    ending = "stopped on request" if result.stopped else "finished"
    took = f" in {wall_time_s / 60:.1f} min" if wall_time_s is not None else ""
    console.print(f"{ending}{took}: {result.epochs_completed} epochs, {result.episodes_played} training episodes "
                  f"(each counted once), {result.eval_episodes} evaluation episodes, policy "
                  f"{result.policy_version or 'none'}")
    if result.es_best:
        best = ", ".join(f"{k}={v:.3g}" for k, v in result.es_best.items())
        console.print(f"ES best search configuration: {best} (mean reward {result.es_best_fitness:.3f})")
    console.print(f"report: {png} · {report_dir / 'report.json'} · TensorBoard: tensorboard --logdir {report_dir}")
    return png


async def run_training(settings: Settings, params: TrainingParams, console: Console, report_dir: Path | None = None,
                       workflow_id: str | None = None) -> TrainingResult:
    from evoskill.platform.temporal import connect

    workflow_id = workflow_id or new_id("train")
    report_dir = report_dir or settings.state_dir / "reports" / workflow_id
    client = await connect(settings, attempts=3)
    started = time.perf_counter()
    handle = await start_training(client, settings, params, workflow_id)
    console.print(f"training workflow [bold]{workflow_id}[/bold] on task queue {settings.temporal.task_queue}: "
                  f"{describe_plan(params)}")
    result = await follow(handle, console, report_dir)
    write_report(result, report_dir, console, params, time.perf_counter() - started, settings=settings)
    return result
