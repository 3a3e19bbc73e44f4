"""The second retrieval stage (seed 004 §2.2), on the candidates the vector search recalled.

relevance = similarity + reward_weight * reward normalised to [0, 1] over the candidates (the best 1,
the worst 0, all equal 0), so a weight means the same whatever the reward scale of the environment.
Then maximal marginal relevance picks the results one by one, trading relevance against the largest
similarity to what is already picked (`diversity` 0 = relevance order, 1 = spread only): near-duplicate
memories of one situation do not crowd out the alternatives (novelty).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evoskill.core.errors import InvalidInput


@dataclass(frozen=True)
class Ranked:
    index: int  # into the candidates
    relevance: float
    similarity: float


def normalised_rewards(rewards: Sequence[float]) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.size == 0:
        return r
    span = float(r.max() - r.min())
    return (r - r.min()) / span if span > 0 else np.zeros_like(r)


def relevance(similarities: Sequence[float], rewards: Sequence[float], reward_weight: float) -> np.ndarray:
    return np.asarray(similarities, dtype=np.float64) + reward_weight * normalised_rewards(rewards)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def mmr(relevance: np.ndarray, vectors: np.ndarray, diversity: float, limit: int) -> list[int]:
    """Indices picked by maximal marginal relevance; ties go to the lower index (the recall order)."""
    if not 0.0 <= diversity <= 1.0:
        raise InvalidInput(f"diversity must be in [0, 1], got {diversity}")
    n = len(relevance)
    limit = min(limit, n)
    if limit <= 0:
        return []
    order = np.argsort(-relevance, kind="stable")
    if diversity == 0.0:
        return [int(i) for i in order[:limit]]
    unit = unit_rows(np.asarray(vectors, dtype=np.float64))
    similarity = unit @ unit.T
    picked: list[int] = []
    closest = np.full(n, -np.inf)  # largest similarity of each candidate to the picked ones
    free = np.ones(n, dtype=bool)
    for _ in range(limit):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        score = (1.0 - diversity) * relevance - diversity * penalty
        # Among free candidates, best score; the relevance order breaks ties (stable).
        best = max((int(i) for i in order if free[i]), key=lambda i: score[i])
        picked.append(best)
        free[best] = False
        closest = np.maximum(closest, similarity[best])
    return picked


def rank(
    similarities: Sequence[float],
    rewards: Sequence[float],
    vectors: np.ndarray,
    *,
    reward_weight: float,
    diversity: float,
    limit: int,
) -> list[Ranked]:
    """Re-rank recalled candidates and pick `limit` of them, best first."""
    rel = relevance(similarities, rewards, reward_weight)
    return [Ranked(i, float(rel[i]), float(similarities[i])) for i in mmr(rel, vectors, diversity, limit)]
