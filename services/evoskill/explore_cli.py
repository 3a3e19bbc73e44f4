"""`evoskill explore`: run the ExplorationWorkflow (shadow, canary, promote or roll back, watch) on the stack."""

from __future__ import annotations

from typing import Annotated

import typer

from evoskill.cli_choices import HeldOutFold
from evoskill.platform.config import Settings


def explore(
    candidate: Annotated[str, typer.Option(help="policy version to try, e.g. v000007")],
    env: Annotated[list[str], typer.Option(help="environment spec (repeat for several), e.g. twx:coin")],
    baseline: Annotated[str, typer.Option(help="default: the serving version (none promoted: the newest older)")] = "",
    shadow_episodes: Annotated[int, typer.Option(min=0, help="baseline plays, candidate only says what it would "
                                                             "do")] = 2,
    canary_episodes: Annotated[int, typer.Option(min=2, help="episodes split between candidate and baseline")] = 4,
    canary_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="share of canary episodes the candidate "
                                                                          "plays (strictly between 0 and 1)")] = 0.5,
    watch_episodes: Annotated[int, typer.Option(min=0, help="after promotion, played with what serves")] = 2,
    simulations: Annotated[int, typer.Option(min=1, help="MCTS simulations per step")] = 8,
    max_steps: Annotated[int, typer.Option(min=1)] = 10,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    fold: Annotated[HeldOutFold, typer.Option(help="kept out of the learner's replay")] = HeldOutFold.DEV,
    min_agreement: Annotated[float, typer.Option(min=0.0, max=1.0, help="shadow: agreement needed where the "
                                                                        "baseline won")] = 0.5,
    success_margin: Annotated[float, typer.Option(help="allowed shortfall in success rate")] = 0.1,
    reward_margin: Annotated[float, typer.Option(help="allowed shortfall in mean reward")] = 0.5,
    alpha: Annotated[float, typer.Option(min=0.0, max=0.5, help="one-sided test level, above 0 (0.5 = point "
                                                                "estimates decide)")] = 0.1,
    workflow_id: Annotated[str | None, typer.Option(help="default: explore-<random>")] = None,
) -> None:
    """Try a policy version safely: shadow mode, a canary, then promotion or rollback, and a watch window."""
    from evoskill.cli_support import console, fail, located_env, refuse_problems, run_client
    from evoskill.clients.episodes import services
    from evoskill.clients.training import failure_message
    from evoskill.orchestrator.exploration.logic import ExplorationParams, Thresholds, validate

    params = ExplorationParams(
        candidate=candidate, envs=[located_env(e) for e in env], baseline=baseline, shadow_episodes=shadow_episodes,
        canary_episodes=canary_episodes, canary_fraction=canary_fraction, watch_episodes=watch_episodes,
        simulations=simulations, max_steps=max_steps, seed=seed, fold=fold.value,
        thresholds=Thresholds(min_agreement=min_agreement, success_margin=success_margin,
                              reward_margin=reward_margin, alpha=alpha))
    refuse_problems(validate(params), explore, {"envs": "env"})
    settings = Settings()

    async def main() -> None:
        from temporalio.client import WorkflowFailureError

        from evoskill.orchestrator.exploration.starter import explore as run_exploration
        from evoskill.platform.temporal import connect
        from evoskill.platform.temporal import workflow_id as new_id

        async with services(settings, console.print):
            client = await connect(settings, attempts=3)
            wid = workflow_id or new_id("explore")
            console.print(f"exploration workflow [bold]{wid}[/bold]: candidate {candidate} on {', '.join(env)}")
            try:
                result = await run_exploration(client, settings, params, wid)
            except WorkflowFailureError as exc:
                fail(f"exploration workflow failed: {failure_message(exc)}")
                return
        for line in result.decisions:
            console.print(f"  {line}")
        console.print(f"[bold]{result.outcome}[/bold]: {result.candidate} vs baseline {result.baseline}; "
                      f"serving now {result.serving or '(latest)'}")

    run_client(main)
