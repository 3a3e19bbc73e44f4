"""The dynamics model's bonus without torch (core/reward/curiosity.py trains it): the planner's search scores
its stepped edges with `DynamicsWeights.surprise`, numpy only, so that the planner never loads torch for it.

Features are bags of hashed words (`hashed_features`), the same numbers the learner trains on.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evoskill.core.reward.history import words


def _digest(text: str, size: int = 16) -> bytes:
    # hashlib, not hash(): Python salts str hashes per process, and features must agree across services.
    return hashlib.blake2b(text.encode(), digest_size=size).digest()


def hashed_features(text: str, dim: int = 64) -> np.ndarray:
    """Bag of hashed words as a unit float32 vector: cheap fixed-size features when no text embedder is at hand."""
    vector = np.zeros(dim, dtype=np.float32)
    for word in sorted(words(text)):
        digest = _digest(word, 8)
        index = int.from_bytes(digest[:4], "little") % dim
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = np.linalg.norm(vector)
    return vector / norm if norm > 0 else vector


Transition = tuple[str, str, str]  # (observation text, action, next observation text)


def transition_features(transitions: Sequence[Transition], state_dim: int,
                        action_dim: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(states, actions, next states) feature rows of `transitions`; each distinct text hashed once (a node's
    children share their parent's observation)."""
    cache: dict[tuple[str, int], np.ndarray] = {}

    def rows(texts: Sequence[str], dim: int) -> np.ndarray:
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if (text, dim) not in cache:
                cache[text, dim] = hashed_features(text, dim)
            out[i] = cache[text, dim]
        return out

    return (rows([t[0] for t in transitions], state_dim), rows([t[1] for t in transitions], action_dim or state_dim),
            rows([t[2] for t in transitions], state_dim))


@dataclass(frozen=True)
class DynamicsWeights:
    """A `ForwardModel`'s weights in numpy: its bonus in the planner's hot path without a torch call.

    `layers` are (weight [out, in], bias [out]) per Linear, tanh between them, as in `ForwardModel`.
    """

    state_dim: int
    action_dim: int
    layers: tuple[tuple[np.ndarray, np.ndarray], ...]

    def bonus(self, states: np.ndarray, actions: np.ndarray, next_states: np.ndarray) -> np.ndarray:
        """`DynamicsCuriosity.bonus` per row: tanh of the relative squared error, in [0, 1)."""
        hidden = np.concatenate([np.atleast_2d(states), np.atleast_2d(actions)], axis=-1).astype(np.float32)
        for i, (weight, bias) in enumerate(self.layers):
            hidden = hidden @ weight.T + bias
            if i < len(self.layers) - 1:
                hidden = np.tanh(hidden)
        target = np.atleast_2d(next_states).astype(np.float32)
        squared = ((hidden - target) ** 2).sum(axis=-1)
        return np.tanh(squared / ((target**2).sum(axis=-1) + 1e-6)).astype(np.float64)

    def surprise(self, transitions: Sequence[Transition]) -> np.ndarray:
        """The bonus of each (observation, action, next observation), features hashed at the model's dims."""
        if not transitions:
            return np.zeros(0)
        states, actions, next_states = transition_features(transitions, self.state_dim, self.action_dim)
        return self.bonus(states, actions, next_states)

    def finite(self) -> bool:
        return all(np.isfinite(w).all() and np.isfinite(b).all() for w, b in self.layers)

    def to_json(self) -> str:
        """Text for a policy file's metadata: dims and each array's shape and float32 bytes (base64)."""
        def array(a: np.ndarray) -> dict[str, Any]:
            return {"shape": list(a.shape), "data": base64.b64encode(a.astype("<f4").tobytes()).decode()}

        return json.dumps({"state_dim": self.state_dim, "action_dim": self.action_dim,
                           "layers": [[array(w), array(b)] for w, b in self.layers]})

    @classmethod
    def from_json(cls, text: str) -> DynamicsWeights:
        data = json.loads(text)

        def array(a: Mapping[str, Any]) -> np.ndarray:
            return np.frombuffer(base64.b64decode(a["data"]), dtype="<f4").reshape(a["shape"]).astype(np.float32)

        return cls(int(data["state_dim"]), int(data["action_dim"]),
                   tuple((array(w), array(b)) for w, b in data["layers"]))
