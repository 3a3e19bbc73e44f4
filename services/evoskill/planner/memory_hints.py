"""Retrieved memories as a prior over a state's candidate actions (seed 004 §2.2: memory guides the search).

Each retrieved experience votes for the action it took, in proportion to how similar its state is to this
one: +similarity when its episode succeeded, similarity * tanh(reward) otherwise (a failed step with a
negative reward votes against). An experience whose action differs but whose template (skill) matches
votes with `template_share` of that. Each action's votes are summed, clipped to [-1, 1] and scaled by
`weight`: a bounded logit bonus that tilts PUCT's priors without overriding the policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from evoskill.memory.v1 import memory_pb2


def memory_bonus(
    actions: Sequence[str],
    templates: Sequence[str],
    memories: Sequence[memory_pb2.ScoredExperience],
    *,
    weight: float = 1.0,
    template_share: float = 0.3,
) -> np.ndarray:
    """A logit bonus per candidate action (aligned with `actions`), from experiences retrieved for this state."""
    if len(templates) != len(actions):
        raise ValueError(f"{len(actions)} actions but {len(templates)} templates")
    votes = np.zeros(len(actions), dtype=np.float64)
    by_action = {a: i for i, a in enumerate(actions)}
    by_template: dict[str, list[int]] = {}
    for i, template in enumerate(templates):
        if template:
            by_template.setdefault(template, []).append(i)
    for scored in memories:
        experience = scored.experience
        similarity = max(scored.similarity, 0.0)  # dissimilar states say nothing about this one
        vote = similarity * (1.0 if experience.success else math.tanh(experience.reward))
        if experience.action in by_action:
            votes[by_action[experience.action]] += vote
        elif experience.template:
            for i in by_template.get(experience.template, ()):
                votes[i] += template_share * vote
    return weight * np.clip(votes, -1.0, 1.0)


def with_logit_bonus(logits: np.ndarray | None, bonus: np.ndarray) -> np.ndarray:
    """Add the bonus to one state's logits (None = uniform priors, i.e. zeros)."""
    if logits is None:
        return bonus.astype(np.float32)
    out = np.asarray(logits, dtype=np.float32).copy()
    out[: len(bonus)] += bonus.astype(np.float32)
    return out
