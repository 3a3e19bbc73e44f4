"""Count-based novelty and the dynamics-model surprise bonus."""

from __future__ import annotations

import math

import numpy as np
import torch

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.reward.curiosity import (
    DynamicsBatch,
    DynamicsCuriosity,
    DynamicsWeights,
    NoveltyCounter,
    dynamics_batch,
    hashed_features,
    hashed_text_features,
    mix_bonuses,
    transition_features,
)
from evoskill.core.state_key import state_key


def test_novelty_bonus_falls_as_one_over_sqrt_count() -> None:
    counter = NoveltyCounter()
    key = state_key(Observation(text="You are in the kitchen."))
    assert counter.peek(key) == 1.0
    bonuses = [counter.visit(key) for _ in range(4)]
    assert bonuses == [1.0, 1 / math.sqrt(2), 1 / math.sqrt(3), 0.5]
    assert counter.peek(key) == 1 / math.sqrt(5)
    assert counter.visit(state_key(Observation(text="You are in the hall."))) == 1.0


def test_novelty_state_round_trips() -> None:
    counter = NoveltyCounter()
    counter.visit("a")
    counter.visit("a")
    restored = NoveltyCounter.from_dict(counter.to_dict())
    assert restored.counts == {"a": 2}
    assert restored.visit("a") == counter.visit("a")


def test_hashed_features_are_stable_unit_vectors() -> None:
    features = hashed_text_features("take the key from the box", dim=32)
    assert torch.equal(features, hashed_text_features("Take the KEY from the box", dim=32))
    assert math.isclose(float(features.norm()), 1.0, rel_tol=1e-6)
    assert float(hashed_text_features("", dim=32).norm()) == 0.0


def _batch(text: str, action: str, next_text: str) -> DynamicsBatch:
    return DynamicsBatch(
        hashed_text_features(text), hashed_text_features(action), hashed_text_features(next_text)
    )


def test_prediction_error_falls_on_a_transition_the_model_trains_on() -> None:
    curiosity = DynamicsCuriosity(64, 64, lr=1e-2, seed=1)
    familiar = _batch("You are in the kitchen.", "open fridge", "The fridge holds a carrot.")
    novel = _batch("You are in the cellar.", "light lamp", "Spiders everywhere in the dark cellar.")
    start = float(curiosity.bonus(familiar)[0])
    losses = [curiosity.update(familiar) for _ in range(60)]
    end = float(curiosity.bonus(familiar)[0])
    assert losses[-1] < losses[0]
    assert end < 0.5 * start
    assert float(curiosity.bonus(novel)[0]) > end


def test_dynamics_model_is_seeded_and_serialisable() -> None:
    batch = _batch("a room", "go north", "another room")
    first, second = DynamicsCuriosity(64, 64, seed=7), DynamicsCuriosity(64, 64, seed=7)
    assert torch.equal(first.bonus(batch), second.bonus(batch))
    first.update(batch)
    restored = DynamicsCuriosity.from_state_dict(first.state_dict())
    assert torch.equal(restored.bonus(batch), first.bonus(batch))
    assert restored.update(batch) == first.update(batch)


def test_bonuses_mix_within_unit_range() -> None:
    assert mix_bonuses(1.0, 0.0) == 0.5
    assert mix_bonuses(0.2, 0.6, novelty_share=1.0) == 0.2


def test_numpy_weights_agree_with_torch_and_round_trip_as_json() -> None:
    curiosity = DynamicsCuriosity(64, 32, hidden=16, seed=3)
    transitions = [("You are in the kitchen.", "open fridge", "The fridge holds a carrot."),
                   ("You are in the cellar.", "light lamp", "Spiders everywhere."), ("", "look", "")]
    batch = dynamics_batch(transitions, 64, 32)
    curiosity.update(batch)
    weights = curiosity.weights()
    assert np.allclose(weights.surprise(transitions), curiosity.bonus(batch).numpy(), atol=1e-5)
    restored = DynamicsWeights.from_json(weights.to_json())
    assert np.array_equal(restored.surprise(transitions), weights.surprise(transitions))
    assert restored.finite() and weights.surprise([]).shape == (0,)


def test_hashed_features_are_the_same_numbers_in_numpy_and_torch() -> None:
    text = "a brass key lies on the wooden table"
    assert np.array_equal(hashed_features(text, 32), hashed_text_features(text, 32).numpy())
    states, actions, next_states = transition_features([("a", "b", "c"), ("a", "d", "c")], 32, 16)
    assert states.shape == next_states.shape == (2, 32) and actions.shape == (2, 16)
    assert np.array_equal(states[0], hashed_features("a", 32))
