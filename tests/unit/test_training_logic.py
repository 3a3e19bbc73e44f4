"""The pure parts of the training loop: task sampling, episode ids, parameter checks, the ES step, the report."""

from __future__ import annotations

import io
import json
import math
import random
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.core.limits import MESSAGE_CHARS
from evoskill.orchestrator.training.logic import (
    ES_PARAMS,
    ES_START,
    MAX_SEED,
    EpisodeResult,
    EpochMetrics,
    TrainingParams,
    agent_for,
    centered_ranks,
    demo_tasks,
    episode_id,
    es_candidates,
    es_decode,
    es_encode,
    es_perturbations,
    es_update,
    eval_agent_for,
    eval_tasks,
    sample_tasks,
    stages,
    summarise,
    validate,
)
from evoskill.orchestrator.training.report import (
    METRICS_FILE,
    describe_plan,
    epoch_table,
    plot_curves,
    record_metrics,
    success_line,
)


def test_tasks_are_deterministic_distinct_in_the_fold_and_differ_between_epochs() -> None:
    envs = ["twx:coin", "twx:cookingworld"]
    first = sample_tasks(envs, seed=7, epoch=0, count=10, fold_size=50)
    assert first == sample_tasks(envs, seed=7, epoch=0, count=10, fold_size=50)  # a replay draws the same
    assert len({t.seed for t in first}) == 10 and all(0 <= t.seed < 50 for t in first)
    assert [t.env for t in first].count("twx:coin") == 5  # environments take turns
    assert first != sample_tasks(envs, seed=7, epoch=1, count=10, fold_size=50)
    assert first != sample_tasks(envs, seed=8, epoch=0, count=10, fold_size=50)


def test_demonstrations_are_drawn_on_their_own_stream() -> None:
    demos = demo_tasks(["a", "b"], seed=7, count=6, fold_size=50)
    assert demos == demo_tasks(["a", "b"], seed=7, count=6, fold_size=50)
    assert len({t.seed for t in demos}) == 6 and [t.env for t in demos].count("a") == 3
    assert demos != sample_tasks(["a", "b"], seed=7, epoch=0, count=6, fold_size=50)
    assert len(demo_tasks(["a"], seed=7, count=60, fold_size=50)) == 50  # never more than the fold holds
    assert any("demos" in p for p in validate(TrainingParams(envs=["a"], demos=-1)))


def test_stages_number_the_start_the_imitation_and_the_search_epochs() -> None:
    assert stages(TrainingParams(envs=["a"], epochs=2)) == ["search", "search"]
    assert stages(TrainingParams(envs=["a"], epochs=2, evaluate_start=True, demos=5)) == [
        "start", "imitation", "search", "search"]
    assert stages(TrainingParams(envs=["a"], epochs=1, demos=5, train=False)) == ["search"]  # nothing to clone
    plan = describe_plan(TrainingParams(envs=["a"], epochs=2, evaluate_start=True, demos=5, eval_episodes=3))
    assert plan.startswith("epoch 0 the start (3 held-out dev games") and "epoch 1 imitation (5 gold paths" in plan
    assert "epochs 2–3 search" in plan


def test_held_out_games_are_played_by_the_epochs_agent_or_by_theta_alone() -> None:
    assert [eval_agent_for("", v) for v in ("", "v1")] == ["mcts", "policy+mcts"]
    assert [eval_agent_for("policy", v) for v in ("", "v1")] == ["random", "policy"]
    problems = " ".join(validate(TrainingParams(envs=["a"], eval_agent="mcts", online_fraction=1.5,
                                                imitation_steps=-1, search_algorithm="alphazero")))
    assert "eval_agent" in problems and "online_fraction" in problems and "imitation_steps" in problems
    assert "search_algorithm" in problems


def test_the_main_job_starts_imitates_then_searches() -> None:
    from evoskill.clients.jobs import SHORT_TRAINING

    assert validate(SHORT_TRAINING) == []
    plan = stages(SHORT_TRAINING)
    assert plan[:2] == ["start", "imitation"] and plan[2:] == ["search"] * SHORT_TRAINING.epochs
    assert SHORT_TRAINING.eval_agent == "policy" and SHORT_TRAINING.eval_episodes >= 8


def test_eval_tasks_are_the_same_every_epoch() -> None:
    assert eval_tasks(["a", "b"], 3) == eval_tasks(["a", "b"], 3)
    assert [(t.env, t.seed) for t in eval_tasks(["a", "b"], 3)] == [("a", 0), ("b", 1), ("a", 2)]


def test_episode_ids_are_stable_and_unique_per_slot() -> None:
    ids = {episode_id("wf", epoch, kind, i) for epoch in range(3) for kind in ("t", "v") for i in range(5)}
    assert len(ids) == 30
    assert episode_id("wf", 1, "t", 2) == episode_id("wf", 1, "t", 2) == "wf-e0001-t002"


def test_agent_switches_to_the_policy_once_one_exists() -> None:
    assert agent_for("") == "mcts" and agent_for("v000001") == "policy+mcts"


def test_validate_names_each_bad_field() -> None:
    assert validate(TrainingParams(envs=["twx:coin"])) == []
    problems = " ".join(validate(TrainingParams(envs=[], epochs=0, tune="cma", parallelism=0)))
    for word in ("envs", "epochs", "tune", "parallelism"):
        assert word in problems
    assert "es_population" in " ".join(validate(TrainingParams(envs=["x"], tune="es", es_population=3)))
    assert "train_steps" in " ".join(validate(TrainingParams(envs=["x"], train_steps=0)))
    assert validate(TrainingParams(envs=["x"], train_steps=0, train=False)) == []
    problems = " ".join(validate(TrainingParams(envs=["x"], curiosity_weight=-1, memory_weight=math.nan,
                                                entropy_trigger=1.5)))
    for word in ("curiosity_weight must be >= 0", "memory_weight must be >= 0", "entropy_trigger must be in [0, 1]"):
        assert word in problems
    assert validate(TrainingParams(envs=["x"], memory_weight=0.0, entropy_trigger=0.0)) == []


def test_inputs_a_workflow_would_fail_on_late_or_loop_on_are_refused_bounded() -> None:
    problems = validate(TrainingParams(envs=["twx:coin", "x" * 1_000_000], seed=-1, heartbeat_timeout_s=math.nan,
                                       episode_timeout_s=0, train_wait_s=math.inf, tune="es", es_sigma=math.nan,
                                       es_lr=math.inf, start_policy="v" * 5000, eval_agent="y" * 10**6))
    text = "; ".join(problems)
    for name in ("envs holds a spec of 1000000 characters", "seed", "heartbeat_timeout_s", "episode_timeout_s",
                 "train_wait_s", "es_sigma", "es_lr", "start_policy is 5000 characters", "eval_agent"):
        assert name in text
    assert len(text) < 2000  # no value echoed whole
    assert validate(TrainingParams(envs=["twx:coin"], seed=MAX_SEED)) == []


# Near-valid inputs (counts usable: the explicit tests cover bad ones), so many pass `validate` and are run;
# the numbers, seeds and specs anything.
SECONDS = st.one_of(st.floats(), st.sampled_from([0.0, -1.0, 1.0, 60.0, 1e12]))  # NaN and infinities included
SPECS = st.lists(st.one_of(st.just("twx:coin"), st.text(max_size=8), st.just("x" * 2000)), min_size=1, max_size=3)
COUNTS = st.integers(1, 6)
SEEDS = st.one_of(st.integers(-5, 5), st.sampled_from([MAX_SEED, MAX_SEED + 1, 2**62]))


def usable_seconds(*values: float) -> None:
    """What the workflow makes of its timeouts: a timedelta (which raises on NaN, infinity or overflow)."""
    for value in values:
        assert timedelta(seconds=value) > timedelta(0)


@settings(max_examples=300, deadline=None)
@given(st.builds(TrainingParams, envs=SPECS, epochs=COUNTS, episodes_per_epoch=COUNTS, eval_episodes=COUNTS,
                 simulations=COUNTS, max_steps=COUNTS, train_steps=COUNTS, parallelism=COUNTS, seed=SEEDS,
                 fold_size=st.one_of(COUNTS, st.just(10**12)), demos=COUNTS, tune=st.sampled_from(["", "es"]),
                 es_population=COUNTS, es_sigma=st.floats(), es_lr=st.floats(),
                 online_fraction=st.one_of(st.none(), st.floats()), heartbeat_timeout_s=SECONDS,
                 episode_timeout_s=SECONDS, train_wait_s=SECONDS))
def test_any_training_input_is_refused_naming_its_field_or_runs(params: TrainingParams) -> None:
    """A workflow's input comes from any Temporal client: one that passes `validate` must never raise in the
    workflow (a workflow task that raises is retried for ever) nor hand a service a number it refuses."""
    problems = validate(params)
    if problems:
        assert all(len(p) < MESSAGE_CHARS for p in problems)
        return
    usable_seconds(params.heartbeat_timeout_s, params.episode_timeout_s, params.train_wait_s + 3600)
    assert 0 <= params.seed * 1000 + len(stages(params)) < 2**63  # the learner's Train seed, an int64
    tasks = sample_tasks(params.envs, params.seed, 0, params.episodes_per_epoch, params.fold_size)
    assert len(tasks) == params.episodes_per_epoch and all(0 <= t.seed < params.fold_size for t in tasks)
    if params.tune == "es":
        directions = es_perturbations(params.seed, 0, params.es_population, len(ES_PARAMS))
        mean = es_update(es_encode(ES_START), directions, list(range(len(directions))), params.es_sigma,
                         params.es_lr)
        for z in [mean, *es_candidates(mean, directions, params.es_sigma)]:
            assert all(math.isfinite(v) for v in es_decode(z).values())


def test_summarise() -> None:
    results = [EpisodeResult("a", "e", 0, True, 1.0, 2.0, 3, 30), EpisodeResult("b", "e", 1, False, 0.0, 0.0, 5, 50)]
    s = summarise(results)
    assert (s.episodes, s.mean_reward, s.success, s.mean_score) == (2, 1.0, 0.5, 0.5)
    assert summarise([]).episodes == 0


def test_es_encoding_round_trips_and_every_point_is_a_valid_config() -> None:
    assert es_decode(es_encode(ES_START)) == pytest.approx(ES_START)
    rng = random.Random(0)
    for _ in range(200):
        config = es_decode([rng.uniform(-20, 20) for _ in ES_PARAMS])
        assert config["c_puct"] > 0 and config["dirichlet_alpha"] > 0
        assert 0 < config["dirichlet_weight"] < 1 and 1 <= config["rollout_depth"] <= 50
        assert config["rollout_depth"] == int(config["rollout_depth"])


def test_es_perturbations_are_antithetic_and_replayable() -> None:
    directions = es_perturbations(seed=3, generation=2, population=6, dims=4)
    assert directions == es_perturbations(seed=3, generation=2, population=6, dims=4)
    assert directions != es_perturbations(seed=3, generation=3, population=6, dims=4)
    for plus, minus in zip(directions[::2], directions[1::2], strict=True):
        assert minus == [-v for v in plus]


def test_centered_ranks_share_ties() -> None:
    assert centered_ranks([3.0, 1.0, 2.0]) == [0.5, -0.5, 0.0]
    assert centered_ranks([1.0, 1.0]) == [0.0, 0.0]
    assert centered_ranks([5.0]) == [0.0]


def test_es_step_moves_onto_the_better_of_one_pair_and_not_on_a_tie() -> None:
    mean = es_encode(ES_START)
    directions = es_perturbations(seed=0, generation=0, population=2, dims=4)
    plus, minus = es_candidates(mean, directions, sigma=0.3)
    assert es_update(mean, directions, [1.0, 0.0], sigma=0.3, lr=1.0) == pytest.approx(plus)
    assert es_update(mean, directions, [0.0, 1.0], sigma=0.3, lr=1.0) == pytest.approx(minus)
    assert es_update(mean, directions, [0.5, 0.5], sigma=0.3, lr=1.0) == pytest.approx(mean)
    with pytest.raises(ValueError):
        es_update(mean, directions, [1.0], sigma=0.3, lr=1.0)


def test_es_climbs_a_smooth_objective() -> None:
    """On a known optimum (c_puct 2.0, depth 15), a few generations get closer than the start."""
    target = es_encode({**ES_START, "c_puct": 2.0, "rollout_depth": 15.0})

    def fitness(z: list[float]) -> float:
        return -sum((a - b) ** 2 for a, b in zip(z, target, strict=True))

    mean = es_encode(ES_START)
    start = fitness(mean)
    for generation in range(30):
        directions = es_perturbations(seed=1, generation=generation, population=8, dims=4)
        candidates = es_candidates(mean, directions, sigma=0.2)
        mean = es_update(mean, directions, [fitness(c) for c in candidates], sigma=0.2, lr=0.5)
    assert fitness(mean) > start / 10
    assert math.isclose(es_decode(mean)["c_puct"], 2.0, rel_tol=0.25)


def metrics(epoch: int, reward: float) -> EpochMetrics:
    return EpochMetrics(epoch=epoch, agent="mcts", train_episodes=2, train_mean_reward=reward, train_success=0.5,
                        train_mean_score=0.5, eval_episodes=1, eval_success=1.0, eval_mean_reward=reward + 1,
                        eval_mean_score=1.0, policy_version=f"v{epoch}", losses={"policy": 1.0 / (epoch + 1)})


def test_records_one_line_per_epoch_even_when_retried_and_tensorboard_events(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    record_metrics(tmp_path, metrics(0, 1.0))
    record_metrics(tmp_path, metrics(1, 2.0))
    record_metrics(tmp_path, metrics(1, 2.0))  # a retried activity
    lines = [json.loads(line) for line in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [0, 1]
    accumulator = EventAccumulator(str(tmp_path))
    accumulator.Reload()
    rewards = {e.step: e.value for e in accumulator.Scalars("eval/mean_reward")}
    assert rewards == {0: 2.0, 1: 3.0}
    assert "loss/policy" in accumulator.Tags()["scalars"]


def test_curves_are_written_as_png(tmp_path: Path) -> None:
    path = plot_curves([metrics(0, 1.0), metrics(1, 2.0)], tmp_path / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_the_table_numbers_epochs_as_the_records_and_says_what_epoch_0_is() -> None:
    from rich.console import Console

    start = EpochMetrics(0, "", 0, 0.0, 0.0, 0.0, 4, 0.25, 0.1, 0.25, "", stage="start", eval_agent="random")
    cloned = EpochMetrics(1, "demo", 0, 0.0, 0.0, 0.0, 4, 0.75, 9.0, 0.75, "v000001", {"loss": 1.0},
                          note="cloned on 30 gold paths (30 won, 400 steps); library 30 episodes",
                          stage="imitation", eval_agent="policy")
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(epoch_table([start, cloned, metrics(2, 5.0)]))
    text = console.export_text()
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["0", "1", "2"]
    assert "random" in rows[0] and "25% of 4" in rows[0] and "cloned on 30 gold paths" in rows[1]
    assert "epoch 0 = the start, before any training" in text
    assert success_line([start, cloned]) == ("held-out success: 25% (0 start, random) → 75% (1 imitation, "
                                             "policy)")


def test_train_command_refuses_bad_parameters_in_one_line() -> None:
    from typer.testing import CliRunner

    from evoskill.cli import app

    result = CliRunner().invoke(app, ["train", "--env", "twx:coin", "--train-steps", "0", "--tune", "es",
                                      "--es-population", "3"])
    assert result.exit_code == 2
    assert "--train-steps must be >= 1 when training" in result.output  # the flag, not the field
    assert "--es-population must be even" in result.output
    assert "Traceback" not in result.output
    # What a flag declares (a range, a choice) click refuses before the parameters are built.
    for args, named in ((["--epochs", "0"], "'--epochs'"), (["--tune", "cma"], "'--tune'")):
        result = CliRunner().invoke(app, ["train", "--env", "twx:coin", *args])
        assert result.exit_code == 2 and named in result.output and "Traceback" not in result.output
