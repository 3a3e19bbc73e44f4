"""Memory core (seed 004 §2): experience units as Qdrant points, what a retrieval asks for, MMR; no network."""

from evoskill.core.memory.experience import (
    check_experience,
    env_family,
    experience_from_transition,
    experience_key,
    experiences_from_episode,
    from_payload,
    outcome_value,
    point_id,
    query_text,
    reward_unit,
    to_payload,
)
from evoskill.core.memory.ranking import cosines, mmr
from evoskill.core.memory.retrieval import PROFILES, Retrieval, Weights, novelty_penalties, weights_for

__all__ = [
    "PROFILES",
    "Retrieval",
    "Weights",
    "check_experience",
    "cosines",
    "env_family",
    "experience_from_transition",
    "experience_key",
    "experiences_from_episode",
    "from_payload",
    "mmr",
    "novelty_penalties",
    "outcome_value",
    "point_id",
    "query_text",
    "reward_unit",
    "to_payload",
    "weights_for",
]
