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

from evoskill.orchestrator.training.logic import EpochMetrics, TrainingParams, TrainingProgress, stages

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


def describe_plan(p: TrainingParams) -> str:
    """The run's epochs in words, as the report will number them."""
    plan, parts = stages(p), []
    held_out = f"{p.eval_episodes} held-out {p.eval_fold} games"
    if "start" in plan:
        parts.append(f"epoch 0 the start ({held_out}, before any training)")
    if "imitation" in plan:
        parts.append(f"epoch {plan.index('imitation')} imitation ({p.demos} gold paths, "
                     f"{p.imitation_steps or p.train_steps} cloning steps)")
    first = plan.index("search") if "search" in plan else len(plan)
    numbers = f"epoch {first}" if p.epochs == 1 else f"epochs {first}–{len(plan) - 1}"
    search = f"{p.search_algorithm} " if p.search_algorithm else ""
    parts.append(f"{numbers} search ({p.episodes_per_epoch} games of {', '.join(p.envs)} each, {search}MCTS at "
                 f"{p.simulations} simulations, θ-guided once θ exists; {p.train_steps if p.train else 0} learner "
                 f"steps; {held_out})")
    return "; ".join(parts)


def _epoch_label(m: EpochMetrics) -> str:
    return f"{m.epoch}\n{m.stage}"


def plot_curves(history: Sequence[EpochMetrics], path: Path) -> Path:
    """Learning curves over the run's epochs (epoch 0 = the start where the run has one, each labelled with
    its stage): held-out success and rewards on the left, the learner's losses on the right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [m.epoch for m in history]
    played = [m for m in history if m.train_episodes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(epochs, [m.eval_success for m in history], "o-", color="tab:green", linewidth=2,
              label="held-out success")
    left.set_ylim(-0.05, 1.05)
    left.set_ylabel("held-out success rate")
    left.set_xlabel("epoch")
    rewards = left.twinx()
    rewards.plot(epochs, [m.eval_mean_reward for m in history], "^:", color="tab:blue", label="held-out mean reward")
    rewards.plot([m.epoch for m in played], [m.train_mean_reward for m in played], "s--", color="tab:orange",
                 label="train-game mean reward")
    rewards.set_ylabel("reward")
    handles = left.get_legend_handles_labels()[0] + rewards.get_legend_handles_labels()[0]
    left.legend(handles=handles, loc="best", fontsize="small")
    left.set_title("held-out success and rewards")
    names = sorted({k for m in history for k in m.losses})
    for name in names:
        right.plot(epochs, [m.losses.get(name, float("nan")) for m in history], "o-", label=name)
    right.set_xlabel("epoch")
    right.set_title("learner losses" if names else "learner losses (no training ran)")
    if names:
        right.legend(loc="best", fontsize="small")
    for axis in (left, right):
        axis.set_xticks(epochs, [_epoch_label(m) for m in history])
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


def _trained_on(m: EpochMetrics) -> str:
    if m.stage == "start":
        return "nothing yet"
    if m.stage == "imitation":
        return m.note.split(" (")[0] if m.note else "gold paths"
    played = f"{m.train_episodes} games, {m.train_success:.0%} won"
    return played if m.losses else f"{played}, {m.note or 'no update'}"


def _serves(m: EpochMetrics) -> str:
    """The θ serving after the epoch: the one evaluated, or (keep_best) the better one kept."""
    serving = m.serving_version or m.policy_version  # records written before serving_version existed
    return "-" if not serving else serving if serving == m.policy_version else f"[bold]{serving}[/bold] (kept)"


def epoch_table(history: Sequence[EpochMetrics], title: str = "training") -> Table:
    """One row per epoch, numbered as in metrics.jsonl, TensorBoard and the curves (the rewards and every loss
    term are there and in report.json)."""
    caption = "epoch 0 = the start, before any training" if history and history[0].stage == "start" else None
    table = Table("epoch", "stage", "trained on", "held-out by", "held-out success", "loss", "policy", "serves",
                  title=title, caption=caption)
    for m in history:
        table.add_row(str(m.epoch), m.stage, _trained_on(m), m.eval_agent or m.agent or "-",
                      f"{m.eval_success:.0%} of {m.eval_episodes}" if m.eval_episodes else "-",
                      f"{m.losses['loss']:.3g}" if "loss" in m.losses else "-", m.policy_version or "-",
                      _serves(m))
    return table


def success_line(history: Sequence[EpochMetrics]) -> str:
    """The learning curve in one line: held-out success epoch by epoch."""
    return "held-out success: " + " → ".join(f"{m.eval_success:.0%} ({m.epoch} {m.stage}, {m.eval_agent or m.agent})"
                                              for m in history if m.eval_episodes)


def progress_table(p: TrainingProgress) -> Table:
    if p.phase == "done":
        state, shown = ("stopped on request" if p.stopping else "done"), f"{p.epochs} epochs"
    else:
        state = "paused" if p.paused else "stopping after this epoch" if p.stopping else p.phase
        shown = f"{p.epoch} ({p.stage}) of 0–{p.epochs - 1}"
    table = Table("epoch", "state", "episodes", "mean reward", "losses", "policy")
    table.add_row(shown, state,
                  f"{p.epoch_episodes_done}/{p.epoch_episodes_total}, {p.in_flight} playing, "
                  f"{p.episodes_played} in all",
                  "-" if p.mean_reward is None else f"{p.mean_reward:.3f}", _losses(p.losses, 1),
                  p.policy_version or "-")
    return table
