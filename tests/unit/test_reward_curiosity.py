"""The dynamics-model surprise bonus: hashed features, training, and its numpy twin."""

from __future__ import annotations

import math

import numpy as np
import torch

from evoskill.core.reward.curiosity import (
    DynamicsBatch,
    DynamicsCuriosity,
    DynamicsWeights,
    dynamics_batch,
    hashed_features,
    transition_features,
)


def test_hashed_features_are_stable_unit_vectors() -> None:
    features = hashed_features("take the key from the box", dim=32)
    assert np.array_equal(features, hashed_features("Take the KEY from the box", dim=32))
    assert math.isclose(float(np.linalg.norm(features)), 1.0, rel_tol=1e-6)
    assert float(np.linalg.norm(hashed_features("", dim=32))) == 0.0


def _batch(text: str, action: str, next_text: str) -> DynamicsBatch:
    return dynamics_batch([(text, action, next_text)], 64)


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


def test_transition_features_hash_each_text_of_each_column() -> None:
    states, actions, next_states = transition_features([("a", "b", "c"), ("a", "d", "c")], 32, 16)
    assert states.shape == next_states.shape == (2, 32) and actions.shape == (2, 16)
    assert np.array_equal(states[0], hashed_features("a", 32))
