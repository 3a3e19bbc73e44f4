"""The pure reward core: dense terms, multi-dimensional reward, failure attribution and curiosity."""

from evoskill.core.reward.curiosity import (
    DynamicsBatch,
    DynamicsCuriosity,
    NoveltyCounter,
    hashed_text_features,
    mix_bonuses,
    state_key,
    with_curiosity,
)
from evoskill.core.reward.history import EpisodeHistory, EpisodeLog
from evoskill.core.reward.terms import TERM_NAMES, StepSignals, score_transition, step_signals, total_of

__all__ = [
    "TERM_NAMES",
    "DynamicsBatch",
    "DynamicsCuriosity",
    "EpisodeHistory",
    "EpisodeLog",
    "NoveltyCounter",
    "StepSignals",
    "hashed_text_features",
    "mix_bonuses",
    "score_transition",
    "state_key",
    "step_signals",
    "total_of",
    "with_curiosity",
]
