"""The main job `evoskill run` starts on the embedded stack: the health check, then a short training run."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from evoskill.core.agent import AgentKind
from evoskill.orchestrator.health.starter import check_health
from evoskill.orchestrator.training.logic import TrainingParams
from evoskill.platform.config import Settings
from evoskill.platform.temporal import connect

# The main job: what evoskill is for, an agent getting better, in a few minutes on two cores (CoinCollector).
# θ alone (greedy, no search) plays the 10 held-out dev games after each epoch; one game is 10 points.
# Epoch 0, before any training: the random agent, θ's uniform prior (it wins none within 25 steps).
# Epoch 1 clones θ on 200 gold paths for 600 steps: cloning saturates early here (in a one-off in-process sweep,
# 100-300 paths × 300-1000 steps all won 24-27 of 30 dev games; 200 × 600 won 27), and the library's
# generation and the cloning are most of the run's time. Then search epochs from that θ, their games mixed
# with the library (a quarter of each batch), with Gumbel MuZero: its improved policy stays sharp at 4
# simulations, where PUCT's near-uniform visit counts pull the cloned θ down (one run each at an earlier
# budget: 90% -> 80% with PUCT's, 90% -> 100% with Gumbel's). README: what it measured; the search epochs
# do not add to the cloned θ at this budget.
SHORT_TRAINING = TrainingParams(envs=["twx:coin"], evaluate_start=True, demos=200, imitation_steps=600, epochs=3,
                                episodes_per_epoch=6, eval_episodes=10, simulations=4, search_algorithm="gumbel",
                                max_steps=25, train_steps=100, online_fraction=0.25, eval_agent=AgentKind.POLICY,
                                parallelism=2)


async def check_stack(settings: Settings, console: Console) -> bool:
    """Every service reports its health through a Temporal workflow (traced: the client carries the interceptor)."""
    client = await connect(settings, attempts=3)
    results = await check_health(client, settings)
    table = Table("service", "health (via Temporal)")
    for service, ok in results.items():
        table.add_row(service, "[green]SERVING[/green]" if ok else "[red]DOWN[/red]")
    console.print(table)
    return all(results.values())


async def run_main_job(settings: Settings, console: Console, training: TrainingParams | None = SHORT_TRAINING) -> int:
    if not await check_stack(settings, console):
        return 1
    if training is None:
        return 0
    from temporalio.client import WorkflowFailureError

    from evoskill.clients.training import failure_message, run_training

    try:
        await run_training(settings, training, console)
    except WorkflowFailureError as exc:
        console.print(f"[red]training workflow failed:[/red] {failure_message(exc)}")
        return 1
    return 0
