"""θ is never poisoned (learner/trainer.py): an update that leaves θ unfit is never published and the last good
θ is kept; an episode over the limits never enters replay, however it is added."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from evoskill.core.errors import FailedPrecondition, InvalidInput, NotFound
from evoskill.learner.registry import PolicyRegistry
from evoskill.learner.trainer import PolicyTrainer
from evoskill.platform.config import LearnerSettings, Settings
from tests.unit.test_episode_record import played


@pytest.fixture
def trainer(tmp_path: Path) -> PolicyTrainer:
    settings = Settings(state_dir=tmp_path, learner=LearnerSettings(hidden=16, feature_dim=32, batch_size=4))
    trainer = PolicyTrainer(settings)
    episode, _ = played(4, width=5, episode_id="e1")
    assert trainer.ingest(episode) == "stored"
    return trainer


def weights(trainer: PolicyTrainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.learner.net.state_dict().items()}


def test_an_update_that_leaves_theta_not_finite_is_never_published(trainer: PolicyTrainer) -> None:
    assert trainer.train(2).entry.version == "v000001"
    good = weights(trainer)
    for group in trainer.learner.optimizer.param_groups:
        group["lr"] = math.inf  # one finite step then sends every weight to infinity
    with pytest.raises(FailedPrecondition, match=r"unfit to publish \(parameters .* are not finite\).*version 1"):
        trainer.train(3)
    assert [e.version for e in trainer.registry.list()] == ["v000001"]
    assert not list(trainer.registry.directory.glob("policy-v000002*"))
    assert all(torch.equal(good[k], v) for k, v in trainer.learner.net.state_dict().items())
    for group in trainer.learner.optimizer.param_groups:
        group["lr"] = trainer.learner.settings.lr
    assert trainer.train(1).entry.version == "v000002" and not trainer.learner.nonfinite()


def test_a_theta_whose_every_update_is_refused_publishes_nothing(trainer: PolicyTrainer) -> None:
    with torch.no_grad():
        next(trainer.learner.net.parameters()).fill_(math.nan)  # a θ poisoned before this code checked it
    with pytest.raises(FailedPrecondition, match="every one of 2 updates had a non-finite loss"):
        trainer.train(2)
    assert trainer.registry.list() == [] and trainer.learner.skipped_steps == 2


def test_replay_refuses_an_episode_over_the_limits_whoever_adds_it(trainer: PolicyTrainer) -> None:
    poisoned, _ = played(3, width=4, episode_id="nan-1")
    poisoned.steps[2].reward = math.nan
    with pytest.raises(InvalidInput, match=r"steps\[2\]\.reward is nan"):
        trainer.replay.add(poisoned)
    assert "nan-1" not in trainer.replay.online and trainer.replay.online.episode_ids == ["e1"]


def test_a_train_can_start_again_from_a_published_theta(trainer: PolicyTrainer) -> None:
    """from_version: θ (and its optimiser) as published under that version, whatever was trained since; the
    version counter keeps counting up, and only the last `kept_weights` versions can be started from."""
    trainer.train(2)
    v1 = weights(trainer)
    trainer.train(2)
    v2 = weights(trainer)
    assert not all(torch.equal(v1[k], v) for k, v in v2.items())
    trainer.start_from("v000001")
    assert all(torch.equal(v1[k], v) for k, v in weights(trainer).items())
    assert trainer.train(2, from_version="v000001").entry.version == "v000003"
    trainer.start_from("v000002")
    assert all(torch.equal(v2[k], v) for k, v in weights(trainer).items())

    trainer.kept_weights = 2
    trainer.train(1)  # v4: v1 and v2 leave, v3 and v4 are kept
    assert sorted(p.name for p in trainer.weights.glob("*.pt")) == ["v000003.pt", "v000004.pt"]
    with pytest.raises(FailedPrecondition, match=r"v000001's weights are no longer kept.*learner.kept_weights"):
        trainer.train(1, from_version="v000001")
    with pytest.raises(NotFound):
        trainer.start_from("v000009")
    with pytest.raises(InvalidInput, match="not of the form"):
        trainer.start_from("latest")


def test_a_published_version_records_what_made_it(trainer: PolicyTrainer) -> None:
    entry = trainer.train(2, batch_size=2, seed=5, request_id="req-1").entry
    reopened = PolicyRegistry(trainer.registry.directory).get(entry.version)  # in the index, not only in memory
    assert reopened.run["train"] == {"steps": 2, "batch_size": 2, "seed": 5, "request_id": "req-1",
                                     "online_fraction": trainer.replay.online_fraction,
                                     "from_version": "", "environments": {"sciworld:boil": 1}}
    assert reopened.run["settings"]["learner"]["hidden"] == 16 and "git_revision" in reopened.run
    assert reopened.run["libraries"]["torch"] == torch.__version__
