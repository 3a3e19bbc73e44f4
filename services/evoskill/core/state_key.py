"""What makes two observations the same state: the one definition the sandbox (transpositions, no-op
pruning), the search model (revisits), the reward (did the step change anything) and curiosity use.

A state is the world the agent acts in: the room's description, the inventory, the score, whether the
game is over (won, lost) and the actions it offers. The last feedback text is left out where the room
description exists: "That is already closed." differs from the last feedback, yet nothing happened, and
two paths that reach the same room share it. An adapter that gives no description carries the state in
its feedback, so the text stands in for it there. Case and whitespace never make a state new.

Torch- and numba-free: sandbox workers import it.
"""

from __future__ import annotations

import hashlib
import re

from evoskill.common.v1.common_pb2 import Observation

_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Case and whitespace do not make an action or an observation new."""
    return _SPACE.sub(" ", text.strip().lower())


def state_key(observation: Observation) -> str:
    """Equal keys = the same environment state (see the module docstring). Stable across processes
    (hashlib, not Python's salted hash()), so services and workers agree on it."""
    parts = (
        normalise(observation.look or observation.text),
        normalise(observation.inventory),
        repr(float(observation.score)),
        f"{observation.done:d}{observation.won:d}{observation.lost:d}",
        *sorted(observation.valid_actions),
    )
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=12).hexdigest()
