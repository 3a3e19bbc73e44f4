"""The pure reward core: dense terms, multi-dimensional reward, failure attribution.

The curiosity models (`core.reward.curiosity`, torch) are imported from their module, so that scoring a
step never loads torch.
"""

from evoskill.core.reward.history import EpisodeHistory, EpisodeLog
from evoskill.core.reward.scorer import Scorer
from evoskill.core.reward.terms import (
    TERM_NAMES,
    StepSignals,
    score_transition,
    step_signals,
    total_of,
    with_curiosity,
)

__all__ = [
    "TERM_NAMES",
    "EpisodeHistory",
    "EpisodeLog",
    "Scorer",
    "StepSignals",
    "score_transition",
    "step_signals",
    "total_of",
    "with_curiosity",
]
