"""Diversity among the re-scored candidates (seed 004 §2.2): maximal marginal relevance picks the results
one by one, trading each candidate's score against its largest similarity to what is already picked
(`diversity` 0 = score order, 1 = spread only), so near-duplicate memories of one situation do not crowd
out the alternatives.

It runs here, on the candidates Qdrant's formula query scored, and not as Qdrant's own MMR query: that one
takes a candidate's similarity to the query vector as its relevance, so with diversity on, reward, outcome
and novelty would stop counting.
"""

from __future__ import annotations

import numpy as np

from evoskill.core.errors import InvalidInput


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def cosines(query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of `vectors` to `query` (what the first stage ranked by)."""
    rows = unit_rows(np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1))
    return rows @ unit_rows(np.asarray(query, dtype=np.float64).reshape(1, -1))[0]


def mmr(relevance: np.ndarray, vectors: np.ndarray, diversity: float, limit: int) -> list[int]:
    """Indices picked by maximal marginal relevance; ties go to the lower index (the score order)."""
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
