"""What a training run leaves behind: a JSONL line and TensorBoard scalars per epoch, curves as PNG, tables.

TensorBoard events are written with tensorboard's own event writer (what torch's SummaryWriter wraps), so
neither the worker nor the CLI imports torch for it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from rich.table import Table

from evoskill.orchestrator.training.logic import EpochMetrics, TrainingProgress

METRICS_FILE = "metrics.jsonl"


def epoch_scalars(m: EpochMetrics) -> dict[str, float]:
    scalars = {
        "train/mean_reward": m.train_mean_reward, "train/success": m.train_success,
        "train/mean_score": m.train_mean_score, "eval/success": m.eval_success,
        "eval/mean_reward": m.eval_mean_reward, "eval/mean_score": m.eval_mean_score,
    }
    scalars.update({f"loss/{k}": v for k, v in m.losses.items()})
    scalars.update({f"search/{k}": v for k, v in m.search.items()})
    if m.es_fitness:
        scalars["es/best_fitness"] = max(m.es_fitness)
    return scalars


def write_scalars(logdir: Path, step: int, scalars: dict[str, float]) -> None:
    """Append one event per scalar to a TensorBoard event file under logdir."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    logdir.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(logdir))
    try:
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=float(v)) for tag, v in scalars.items()]
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=values)))
    finally:
        writer.close()


def record_metrics(directory: Path, metrics: EpochMetrics) -> None:
    """One JSONL line per epoch, rewritten by epoch so that a retried activity leaves one line, not two."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / METRICS_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    lines = [line for line in lines if line.get("epoch") != metrics.epoch] + [asdict(metrics)]
    lines.sort(key=lambda line: line["epoch"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(line) + "\n" for line in lines))
    tmp.replace(path)
    write_scalars(directory, metrics.epoch, epoch_scalars(metrics))


def plot_curves(history: Sequence[EpochMetrics], path: Path) -> Path:
    """Learning curves: rewards and success per epoch on the left, the learner's losses on the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [m.epoch + 1 for m in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(epochs, [m.eval_mean_reward for m in history], "o-", label="eval mean reward")
    left.plot(epochs, [m.train_mean_reward for m in history], "s--", label="train mean reward")
    left.set_xlabel("epoch")
    left.set_ylabel("reward")
    success = left.twinx()
    success.plot(epochs, [m.eval_success for m in history], "^:", color="tab:green", label="eval success")
    success.set_ylim(-0.05, 1.05)
    success.set_ylabel("success rate")
    handles = left.get_legend_handles_labels()[0] + success.get_legend_handles_labels()[0]
    left.legend(handles=handles, loc="best", fontsize="small")
    left.set_title("rewards and success")
    names = sorted({k for m in history for k in m.losses})
    for name in names:
        right.plot(epochs, [m.losses.get(name, float("nan")) for m in history], "o-", label=name)
    right.set_xlabel("epoch")
    right.set_title("learner losses" if names else "learner losses (no training ran)")
    if names:
        right.legend(loc="best", fontsize="small")
    for axis in (left, right):
        axis.set_xticks(epochs)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _losses(losses: dict[str, float], limit: int = 3) -> str:
    """The total first, then the terms θ is judged by; the rest stays in the JSON and TensorBoard."""
    first = [k for k in ("loss", "distill", "value") if k in losses]
    names = (first + sorted(k for k in losses if k not in first))[:limit]
    return " ".join(f"{k} {losses[k]:.3g}" for k in names) or "-"


def epoch_table(history: Sequence[EpochMetrics], title: str = "training") -> Table:
    table = Table("epoch", "agent", "eval success", "eval reward", "train reward", "losses", "policy", title=title)
    for m in history:
        policy = m.policy_version or (f"- ({m.note})" if m.note else "-")
        table.add_row(str(m.epoch + 1), m.agent, f"{m.eval_success:.0%}" if m.eval_episodes else "-",
                      f"{m.eval_mean_reward:.3f}" if m.eval_episodes else "-",
                      f"{m.train_mean_reward:.3f} ({m.train_success:.0%} won)", _losses(m.losses), policy)
    return table


def progress_table(p: TrainingProgress) -> Table:
    if p.phase == "done":
        state, shown = ("stopped on request" if p.stopping else "done"), p.epoch
    else:
        state, shown = ("paused" if p.paused else "stopping after this epoch" if p.stopping else p.phase), p.epoch + 1
    table = Table("epoch", "state", "episodes", "mean reward", "losses", "policy")
    table.add_row(f"{shown}/{p.epochs}", state,
                  f"{p.epoch_episodes_done}/{p.epoch_episodes_total}, {p.in_flight} playing, "
                  f"{p.episodes_played} in all",
                  "-" if p.mean_reward is None else f"{p.mean_reward:.3f}", _losses(p.losses, 1),
                  p.policy_version or "-")
    return table
