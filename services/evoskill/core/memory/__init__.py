"""Memory core (seed 004 §2): experience units as Qdrant points and the two-stage ranking, no network."""

from evoskill.core.memory.experience import (
    check_experience,
    experience_from_transition,
    experience_key,
    from_payload,
    point_id,
    query_text,
    to_payload,
)
from evoskill.core.memory.ranking import Ranked, mmr, normalised_rewards, rank, relevance

__all__ = [
    "Ranked",
    "check_experience",
    "experience_from_transition",
    "experience_key",
    "from_payload",
    "mmr",
    "normalised_rewards",
    "point_id",
    "query_text",
    "rank",
    "relevance",
    "to_payload",
]
