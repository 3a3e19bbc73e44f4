"""ONNX export of both encoders: dynamic axes, torch/onnxruntime agreement, and the planner-side scorer."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from evoskill.core.learn import (
    HashingFeaturizer,
    Learner,
    OnnxPolicy,
    TokenFeaturizer,
    TorchPolicy,
    TrainConfig,
    episode_examples,
    latest_policy,
    make_inputs,
    policy_file_name,
)
from evoskill.platform.config import LearnerSettings
from tests.unit.test_learn_data import take_task_episode

STATES = [
    ("Your task is to eat the apple.", "You see an apple and a knife."),
    ("Your task is to eat the coin.", "You carry the coin."),
    ("Find the key.", ""),
]
CANDIDATES = [
    [("take apple", "take X"), ("take knife", "take X"), ("go north", "go north")],
    [("eat coin", "eat X")],
    [("open door", "open X"), ("unlock chest with key", "unlock X with Y"), ("look", "look"), ("go west", "go west")],
]


def encoder_featurizer(encoder: str) -> HashingFeaturizer | TokenFeaturizer:
    """The fast featuriser of each encoder: hashed n-gram vectors (mlp) or hashed word tokens (reader)."""
    return TokenFeaturizer("hash", dim=16, buckets=256) if encoder == "reader" else HashingFeaturizer(32)


@pytest.fixture(scope="module", params=["mlp", "reader"])
def trained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Learner, Path]:
    learner = Learner(
        encoder_featurizer(request.param), LearnerSettings(lr=3e-3),
        TrainConfig(hidden=32, skill_dim=8, max_skills=64, width=16),
    )
    rng = np.random.default_rng(0)
    batch = learner.collate([ex for i in range(6) for ex in episode_examples(take_task_episode(f"e{i}", rng))])
    for _ in range(5):
        learner.update(batch)
    path = learner.export(tmp_path_factory.mktemp("policies"))
    return learner, path


def test_onnx_matches_torch_on_a_batch_with_other_shapes(trained: tuple[Learner, Path]) -> None:
    learner, path = trained
    policy = OnnxPolicy(path)
    # B=3, A=4 (and other token counts): not the export's example shapes; then a wider, longer batch.
    longer = [(g + " Notes: a recipe with many more words in it", o * 3) for g, o in STATES]
    for states, candidates in ((STATES, CANDIDATES), (longer + STATES, CANDIDATES + [c[::-1] for c in CANDIDATES])):
        inputs = make_inputs(learner.featurizer, learner.vocab.get, states, candidates)
        logits, values = policy.run(inputs)
        with torch.no_grad():
            ref_logits, ref_values = learner.net(*(torch.from_numpy(x) for x in inputs))
        mask = inputs.mask
        np.testing.assert_allclose(logits[mask], ref_logits.numpy()[mask], atol=1e-5)
        np.testing.assert_allclose(values, ref_values.numpy(), atol=1e-5)
        assert logits.shape == (len(states), 4) and values.shape == (len(states),)


def test_scorer_priors_and_values(trained: tuple[Learner, Path]) -> None:
    learner, path = trained
    policy = OnnxPolicy(path)
    priors, values = policy.score(STATES, CANDIDATES)
    assert [len(p) for p in priors] == [3, 1, 4] and values.shape == (3,)
    for p in priors:
        assert p.dtype == np.float32 and float(p.sum()) == pytest.approx(1.0, abs=1e-6) and (p > 0).all()
    torch_priors, torch_values = TorchPolicy(learner.net, learner.vocab, learner.featurizer).score(STATES, CANDIDATES)
    for a, b in zip(priors, torch_priors, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(values, torch_values, atol=1e-5)
    assert policy.score([], []) == ([], pytest.approx(np.zeros(0)))
    empty_priors, _ = policy.score([("g", "o")], [[]])  # a terminal state: no candidates, still a value
    assert empty_priors[0].shape == (0,)


def test_file_is_versioned_and_self_describing(trained: tuple[Learner, Path]) -> None:
    learner, path = trained
    assert path.name == policy_file_name(learner.version) == "policy-v000001.onnx"
    policy = OnnxPolicy(path)
    assert policy.version == 1
    assert policy.featurizer_spec == learner.featurizer.spec == policy.featurizer.spec
    assert policy.vocab.templates == learner.vocab.templates and "take X" in policy.vocab
    assert policy.net_config["hidden"] == 32 and policy.net_config["encoder"] == learner.net_config.encoder
    assert not [p for p in os.listdir(path.parent) if p.endswith(".tmp")]
    with pytest.raises(ValueError, match="trained on"):
        OnnxPolicy(path, HashingFeaturizer(16))


def test_latest_policy_picks_the_highest_version(tmp_path: Path) -> None:
    assert latest_policy(tmp_path) is None
    for v in (2, 10, 9):
        (tmp_path / policy_file_name(v)).write_bytes(b"")
    (tmp_path / "policy-vX.onnx").write_bytes(b"")
    assert latest_policy(tmp_path) == tmp_path / "policy-v000010.onnx"
