"""The update step: it learns, it is seeded, it trains from replay, and it checkpoints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from evoskill.core.learn import (
    Example,
    HashingFeaturizer,
    Learner,
    MixedReplay,
    OnnxPolicy,
    TokenFeaturizer,
    TorchPolicy,
    TrainConfig,
    episode_examples,
)
from evoskill.core.learn.export import unfit
from evoskill.core.reward.curiosity import dynamics_batch
from evoskill.planner.policy import OnnxPolicyFn
from evoskill.platform.config import LearnerSettings
from tests.unit.test_learn_data import make_episode, make_step, take_task_episode

SMALL = TrainConfig(hidden=32, skill_dim=8, max_skills=64, seed=0)
FAST = LearnerSettings(lr=3e-3, batch_size=16)


def _examples(n: int, seed: int = 0, won: bool = True) -> list[Example]:
    rng = np.random.default_rng(seed)
    return [ex for i in range(n) for ex in episode_examples(take_task_episode(f"e{seed}-{i}", rng, won=won))]


def test_updates_decrease_the_distillation_loss() -> None:
    learner = Learner(HashingFeaturizer(64), FAST, SMALL)
    train, held_out = _examples(24, seed=0), _examples(8, seed=1)
    before, before_held = learner.evaluate(train), learner.evaluate(held_out)
    batch = learner.collate(train)
    for _ in range(40):
        metrics = learner.update(batch)
    after, after_held = learner.evaluate(train), learner.evaluate(held_out)
    assert after["distill"] < 0.8 * before["distill"]
    assert after["value"] < before["value"]
    assert after_held["distill"] < before_held["distill"]  # the text features generalise to new objects
    assert set(metrics) >= {"loss", "distill", "value", "pg", "self_imitation", "entropy", "contrastive", "grad_norm"}
    assert learner.steps == 40


def test_same_seed_same_training() -> None:
    def run() -> list[float]:
        replay = MixedReplay(seed=3)
        rng = np.random.default_rng(0)
        for i in range(6):
            replay.add(take_task_episode(f"e{i}", rng))
        learner = Learner(HashingFeaturizer(32), FAST, SMALL, replay)
        return [learner.train(1)["loss"] for _ in range(3)]

    assert run() == run()


def test_train_samples_replay_and_updates_priorities() -> None:
    replay = MixedReplay(online_fraction=0.5)
    rng = np.random.default_rng(0)
    for i in range(4):
        replay.add(take_task_episode(f"on{i}", rng))
        replay.add(take_task_episode(f"off{i}", rng), offline=True)
    _, initial = replay.online._view()
    initial = initial.copy()
    learner = Learner(HashingFeaturizer(32), FAST, SMALL, replay)
    metrics = learner.train(5)
    assert metrics["steps"] == 5 and np.isfinite(metrics["loss"])
    assert not np.allclose(replay.online._view()[1], initial)
    assert Learner(HashingFeaturizer(32), FAST, SMALL, MixedReplay()).train(3) == {}


def test_contrastive_term_is_active_for_successful_episodes_only() -> None:
    learner = Learner(HashingFeaturizer(32), FAST, SMALL)
    won = learner.collate(_examples(4, won=True))
    lost = learner.collate(_examples(4, won=False))
    assert len(won.anchors) == 8 and won.negatives.shape == (8, SMALL.contrastive_negatives)
    assert len(lost.anchors) == 0
    assert learner.update(won)["contrastive"] > 0 and learner.update(lost)["contrastive"] == 0


def test_zero_coefficients_leave_only_distillation() -> None:
    settings = LearnerSettings(value_coef=0, pg_coef=0, entropy_coef=0, contrastive_coef=0, self_imitation_coef=0)
    learner = Learner(HashingFeaturizer(32), settings, SMALL)
    metrics = learner.evaluate(_examples(3))
    assert metrics["loss"] == pytest.approx(metrics["distill"])


def test_many_candidates_are_capped_keeping_searched_and_taken() -> None:
    actions = [f"take item{i}" for i in range(50)]
    visits = [0.0] * 50
    visits[7], visits[30] = 0.6, 0.4
    step = make_step("g", "o", actions, taken=42, visits=visits)
    (ex,) = episode_examples(make_episode("e", [step]))
    learner = Learner(HashingFeaturizer(16), FAST, TrainConfig(hidden=16, skill_dim=4, max_candidates=5))
    batch = learner.collate([ex])
    assert batch.mask.shape == (1, 5) and bool(batch.mask.all())
    kept = batch.visit_probs[0]
    assert float(kept.sum()) == pytest.approx(1.0) and sorted(kept.tolist())[-2:] == pytest.approx([0.4, 0.6])


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    learner = Learner(HashingFeaturizer(32), FAST, SMALL)
    examples = _examples(4)
    batch = learner.collate(examples)
    for _ in range(3):
        learner.update(batch)
    path = learner.save(tmp_path / "ckpt" / "learner.pt")

    restored = Learner(HashingFeaturizer(32), FAST, TrainConfig(hidden=32, skill_dim=8, max_skills=64, seed=99))
    restored.load(path)
    assert restored.steps == 3 and restored.vocab.templates == learner.vocab.templates
    with torch.no_grad():
        a, b = learner.net(*batch.inputs), restored.net(*batch.inputs)
    torch.testing.assert_close(a, b)
    assert learner.update(batch) == restored.update(batch)  # the optimiser state came back too

    with pytest.raises(ValueError, match="trained with"):
        Learner(HashingFeaturizer(16), FAST, SMALL).load(path)


def test_a_non_finite_batch_never_reaches_the_weights() -> None:
    learner = Learner(HashingFeaturizer(64), FAST, SMALL)
    batch = learner.collate(_examples(4))
    poisoned = batch._replace(returns=torch.full_like(batch.returns, float("nan")))
    before = [p.detach().clone() for p in learner.net.parameters()]
    metrics = learner.update(poisoned)
    assert metrics["skipped"] == 1.0 and learner.skipped_steps == 1 and learner.steps == 0
    assert all(torch.equal(a, b) for a, b in zip(before, learner.net.parameters(), strict=True))
    learner.update(batch)  # a clean batch still trains
    assert learner.steps == 1 and all(torch.isfinite(p).all() for p in learner.net.parameters())


def recipe_examples(nouns: Sequence[str], n: int, seed: int) -> list[Example]:
    """One step each: the notes say which of three cuts to apply to which of two things in the room;
    the candidates are every cut of both. Only reading the notes tells them apart."""
    rng = np.random.default_rng(seed)
    cuts, out = ("slice", "dice", "chop"), []
    for i in range(n):
        thing, other = (f"{rng.choice(('red', 'green', 'old'))} {noun}" for noun in rng.choice(nouns, 2, replace=False))
        cut = cuts[rng.integers(3)]
        actions = tuple(f"{c} {t}" for t in (thing, other) for c in cuts)
        taken = actions.index(f"{cut} {thing}")
        visits = np.zeros(len(actions), np.float32)
        visits[taken] = 1.0
        out.append(Example(f"r{seed}-{i}", 0, f"Cook a meal.\nNotes: Directions:\n  {cut} the {thing}",
                           f"You see a {thing} and a {other}.", actions, tuple(a.split()[0] + " X" for a in actions),
                           visits, np.zeros(len(actions), np.float32), np.zeros(len(actions), bool), float("nan"),
                           taken, 1.0))
    return out


def test_the_reader_ties_a_candidate_to_the_notes_for_objects_it_never_saw() -> None:
    learner = Learner(TokenFeaturizer("hash", dim=16, buckets=1024), LearnerSettings(lr=3e-3, batch_size=16),
                      TrainConfig(hidden=32, skill_dim=8, max_skills=64, width=32, layers=1, seed=0))
    train = recipe_examples(("apple", "potato", "carrot", "onion", "pepper", "tuna"), 64, seed=0)
    held_out = recipe_examples(("banana", "lettuce", "salmon", "cheese"), 32, seed=1)  # words never trained on
    rng = np.random.default_rng(0)
    for _ in range(40):
        learner.update(learner.collate([train[i] for i in rng.integers(len(train), size=16)]))
    priors, _ = TorchPolicy(learner.net, learner.vocab, learner.featurizer).score(
        [(ex.goal, ex.observation) for ex in held_out], [ex.candidates() for ex in held_out])
    accuracy = np.mean([int(np.argmax(p)) == ex.taken for p, ex in zip(priors, held_out, strict=True)])
    assert accuracy >= 0.9  # chance is 1/6


def _dynamics_error(learner: Learner, transitions: Sequence[tuple[str, ...]]) -> float:
    assert learner.dynamics is not None
    batch = dynamics_batch([(s, a, n) for s, a, n in transitions], SMALL.dynamics_dim)
    with torch.no_grad():
        return float(learner.dynamics.prediction_error(batch).mean())


def test_the_dynamics_model_beside_theta_learns_the_transitions_it_trains_on() -> None:
    replay = MixedReplay(seed=1)
    rng = np.random.default_rng(0)
    episodes = [take_task_episode(f"e{i}", rng) for i in range(6)]
    for episode in episodes:
        replay.add(episode)
    transitions = [ex.transition for episode in episodes for ex in episode_examples(episode)]
    assert all(len(t) == 3 for t in transitions)  # (observation, action, next observation)
    learner = Learner(HashingFeaturizer(32), FAST, SMALL, replay)
    before = _dynamics_error(learner, transitions)
    metrics = [learner.train(2) for _ in range(10)]
    assert _dynamics_error(learner, transitions) < 0.5 * before
    assert metrics[-1]["dynamics_loss"] < metrics[0]["dynamics_loss"]
    assert Learner(HashingFeaturizer(32), FAST, replace(SMALL, dynamics_steps=0), replay).dynamics is None


def test_the_dynamics_model_is_checkpointed_and_published_with_theta(tmp_path: Path) -> None:
    replay = MixedReplay(seed=1)
    rng = np.random.default_rng(0)
    for i in range(4):
        replay.add(take_task_episode(f"e{i}", rng))
    learner = Learner(HashingFeaturizer(32), FAST, SMALL, replay)
    learner.train(3)
    assert learner.dynamics is not None
    transitions = [("You see a coin.", "take coin", "You carry the coin."), ("a", "b", "c")]
    expected = learner.dynamics.weights().surprise(transitions)
    restored = Learner(HashingFeaturizer(32), FAST, SMALL)
    restored.load(learner.save(tmp_path / "theta.pt"))
    assert restored.dynamics is not None
    assert np.array_equal(restored.dynamics.weights().surprise(transitions), expected)
    policy = OnnxPolicy(learner.export(tmp_path / "policies"))
    assert policy.dynamics is not None and unfit(policy) is None
    assert np.array_equal(policy.dynamics.surprise(transitions), expected)


def test_theta_without_a_dynamics_model_still_loads(tmp_path: Path) -> None:
    old = Learner(HashingFeaturizer(32), FAST, replace(SMALL, dynamics_steps=0))
    assert "dynamics" not in old.state_dict()
    current = Learner(HashingFeaturizer(32), FAST, SMALL)
    current.load(old.save(tmp_path / "old.pt"))  # a fresh dynamics model stays
    assert current.dynamics is not None
    policy = OnnxPolicy(old.export(tmp_path / "policies"))
    assert policy.dynamics is None and unfit(policy) is None
    assert OnnxPolicyFn(policy, "v000001").dynamics is None  # the planner then searches without curiosity
