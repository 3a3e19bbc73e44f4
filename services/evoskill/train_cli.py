"""`evoskill train`: run the TrainingWorkflow on the stack, live, and end with a report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evoskill.cli_choices import (
    EntropyTrigger,
    EvalAgent,
    HeldOutFold,
    LlmModel,
    LlmUrl,
    Memory,
    SearchAlgorithm,
    TuneMode,
    exploration_config,
)
from evoskill.platform.config import Settings


def train(
    env: Annotated[list[str], typer.Option(help="environment spec (repeat for several), e.g. twx:coin")],
    epochs: Annotated[int, typer.Option(min=1)] = 2,
    episodes_per_epoch: Annotated[int, typer.Option(min=1, help="train-fold tasks played per epoch")] = 4,
    eval_episodes: Annotated[int, typer.Option(min=0, help="held-out tasks evaluated after each epoch")] = 2,
    simulations: Annotated[int, typer.Option(min=1, help="MCTS simulations per step")] = 16,
    search_algorithm: Annotated[SearchAlgorithm | None, typer.Option(help="default: search.algorithm",
                                                                     show_default=False)] = None,
    max_steps: Annotated[int, typer.Option(min=1)] = 20,
    explore_epsilon: Annotated[float, typer.Option(min=0.0, max=1.0, metavar="P", help="ε-greedy on the training "
                                                   "games: a random candidate with probability P a step")] = 0.0,
    novelty: Annotated[float, typer.Option(min=0.0, metavar="W", help="count-based novelty bonus W/(count+1) of "
                                           "logit on the training games")] = 0.0,
    curiosity: Annotated[float, typer.Option(min=0.0, metavar="W", help="search's bonus W × the surprise of θ's "
                                             "dynamics model on the training games")] = 0.0,
    memory: Memory = None,
    entropy_trigger: EntropyTrigger = None,
    train_steps: Annotated[int, typer.Option(min=0, help="learner gradient steps per epoch (>= 1 unless "
                                                         "--no-train)")] = 20,
    batch_size: Annotated[int, typer.Option(min=0, help="learner batch size (0 = learner.batch_size)")] = 0,
    parallelism: Annotated[int, typer.Option(min=1, help="episodes played at once")] = 2,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    fold_size: Annotated[int, typer.Option(min=1, help="train-fold seeds the epochs and --demos draw from: 0..N-1 "
                                                       "(ScienceWorld's protocol trains on its first 5 variations)")]
    = 1000,
    eval_fold: HeldOutFold = HeldOutFold.DEV,
    tune: Annotated[TuneMode | None, typer.Option(help="es: evolve c_puct, Dirichlet noise and rollout depth "
                                                       "(default: no tuning)", show_default=False)] = None,
    es_population: Annotated[int, typer.Option(min=2, help="ES candidates per generation (even)")] = 4,
    eval_start: Annotated[bool, typer.Option("--eval-start", help="epoch 0: the held-out games before any training")]
    = False,
    demos: Annotated[int, typer.Option(min=0, help="train-fold gold paths into the offline library, then an "
                                                   "imitation epoch (behaviour cloning on them)")] = 0,
    imitation_steps: Annotated[int, typer.Option(min=0, help="cloning steps of the imitation epoch (0 = "
                                                             "--train-steps)")] = 0,
    online_fraction: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="share of a search epoch's "
                                                          "batches from its games (default learner.online_fraction)")]
    = None,
    eval_agent: Annotated[EvalAgent | None, typer.Option(help="policy: θ alone (random before θ); default: the "
                                                              "epoch's agent", show_default=False)] = None,
    policy: Annotated[str, typer.Option(help="θ version epoch 1 starts from (e.g. from `evoskill library train`)")]
    = "",
    keep_best: Annotated[bool, typer.Option(help="a new θ serves only if its held-out games match the best θ's "
                                                 "so far; else the best goes on serving and training")] = True,
    no_train: Annotated[bool, typer.Option("--no-train", help="play and evaluate only, no learner call")] = False,
    report_dir: Annotated[Path | None, typer.Option(help="default: <state>/reports/<workflow id>")] = None,
    workflow_id: Annotated[str | None, typer.Option(help="default: train-<random>")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="start the run on the running stack, print its id and "
                                                          "return (then `evoskill runs attach|show|pause|stop`)")]
    = False,
    llm: LlmUrl = "",
    llm_model: LlmModel = "",
) -> None:
    """Train θ through the Temporal TrainingWorkflow: play, train, evaluate, per epoch; curves and a table."""
    from evoskill.cli_support import console, fail, located_env, refuse_problems, run_client, with_llm
    from evoskill.clients.episodes import services
    from evoskill.clients.training import failure_message, run_training
    from evoskill.orchestrator.training.logic import TrainingParams, validate

    settings = with_llm(Settings(), llm, llm_model)
    every_game = exploration_config(None, None, memory, settings.search.memory_weight, None, entropy_trigger)
    params = TrainingParams(  # plain strings in the workflow's input, "" where an option is not given
        envs=list(map(located_env, env)), epochs=epochs, episodes_per_epoch=episodes_per_epoch,
        eval_episodes=eval_episodes, simulations=simulations,
        search_algorithm=search_algorithm.value if search_algorithm else "", max_steps=max_steps,
        explore_epsilon=explore_epsilon, novelty_weight=novelty, curiosity_weight=curiosity,
        memory_weight=every_game.get("memory_weight"), entropy_trigger=every_game.get("entropy_trigger"),
        train_steps=train_steps, batch_size=batch_size, parallelism=parallelism, seed=seed, fold_size=fold_size,
        eval_fold=eval_fold.value, tune=tune.value if tune else "", es_population=es_population, train=not no_train,
        evaluate_start=eval_start, demos=demos, imitation_steps=imitation_steps, online_fraction=online_fraction,
        eval_agent=eval_agent.value if eval_agent else "", start_policy=policy, keep_best=keep_best)
    refuse_problems(validate(params), train, {"envs": "env", "start_policy": "policy", "evaluate_start": "eval_start",
                                              "curiosity_weight": "curiosity", "novelty_weight": "novelty"})
    if detach:
        from evoskill.runs_cli import detach as start_detached

        start_detached(settings, params, workflow_id)
        return

    async def main() -> None:
        from temporalio.client import WorkflowFailureError

        async with services(settings, console.print):
            try:
                await run_training(settings, params, console, report_dir, workflow_id)
            except WorkflowFailureError as exc:
                fail(f"training workflow failed: {failure_message(exc)}")

    run_client(main)

