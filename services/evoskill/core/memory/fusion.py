"""Several retrieved memories fused into one hint (seed 004 §2.2): a logit bonus per candidate action for
the search's root priors and for θ alone, and one-line tips for an LLM.

Each memory votes for the action it took, in proportion to how similar its state is to this one, by its
value: +1 when its episode was won; tanh(step reward) while the outcome is pending; for a lost episode the
mean of tanh(step reward) and the outcome's value (core/memory/experience.py: lost with nothing scored = -1),
so a remembered failure votes against its action and a good step of a nearly won episode still mildly for it.
A memory whose action differs but whose template (skill) matches votes with `template_share` of that.

Memories of this very situation (the same task, i.e. environment spec and seed, in the same goal and state,
which the memory service flags `own`: core/memory/retrieval.Situation) are the agent's own earlier attempts here,
and vote by their value alone; the memories of merely similar states (other tasks of the family, other states)
vote by similarity × value, at `similar_share` of the own ones (`search.memory_similar_share`; 1 = every memory
alike). Each group's votes are summed per action and clipped to [-1, 1], then added: own + similar_share ×
similar, scaled by `weight`. (Measured on repeated CoinCollector games: with one pool of cosine votes, the one
memory of this state was outvoted by a dozen similar rooms of other games; docs/results.md, "Memory-augmented
search".)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from evoskill.core.memory.experience import outcome_value
from evoskill.memory.v1 import memory_pb2

MAX_FEEDBACK_CHARS = 80  # of the environment's answer quoted in a tip


def won(experience: memory_pb2.Experience) -> bool:
    """Won, or (outcome pending, or stored by a release before outcomes) marked a success."""
    pending = experience.outcome == memory_pb2.OUTCOME_PENDING
    return experience.outcome == memory_pb2.OUTCOME_WON or (pending and experience.success)


def memory_value(experience: memory_pb2.Experience) -> float:
    """How good the remembered action was, in [-1, 1] (see the module docstring)."""
    if won(experience):
        return 1.0
    step = math.tanh(experience.reward)
    if experience.outcome == memory_pb2.OUTCOME_LOST:
        return (step + outcome_value(experience.outcome, experience.episode_score)) / 2
    return step


def memory_bonus(
    actions: Sequence[str],
    templates: Sequence[str],
    memories: Sequence[memory_pb2.ScoredExperience],
    *,
    weight: float = 1.0,
    template_share: float = 0.3,
    similar_share: float = 1.0,
) -> np.ndarray:
    """A logit bonus per candidate action (aligned with `actions`), from experiences retrieved for this state;
    the memory service flags this situation's own memories (`ScoredExperience.own`; see the module docstring)."""
    if len(templates) != len(actions):
        raise ValueError(f"{len(actions)} actions but {len(templates)} templates")
    own, similar = np.zeros(len(actions), dtype=np.float64), np.zeros(len(actions), dtype=np.float64)
    by_action = {a: i for i, a in enumerate(actions)}
    by_template: dict[str, list[int]] = {}
    for i, template in enumerate(templates):
        if template:
            by_template.setdefault(template, []).append(i)
    for scored in memories:
        experience = scored.experience
        mine = scored.own
        votes = own if mine else similar
        # dissimilar states say nothing about this one; this state's own memory is this state
        vote = (1.0 if mine else max(scored.similarity, 0.0)) * memory_value(experience)
        if experience.action in by_action:
            votes[by_action[experience.action]] += vote
        elif experience.template:
            for i in by_template.get(experience.template, ()):
                votes[i] += template_share * vote
    return weight * (np.clip(own, -1.0, 1.0) + similar_share * np.clip(similar, -1.0, 1.0))


def _what_it_did(e: memory_pb2.Experience) -> str:
    if won(e):
        return f"was part of an episode that succeeded (step reward {e.reward:+.2f})"
    if e.outcome == memory_pb2.OUTCOME_LOST and e.reward <= 0:
        return f"was part of an episode that failed (step reward {e.reward:+.2f})"
    if e.reward > 0:
        return f"earned reward {e.reward:+.2f}"
    if e.reward < 0:
        return f"was penalised (reward {e.reward:+.2f})"
    return "achieved nothing"


def tips_from_memories(memories: Sequence[memory_pb2.ScoredExperience], limit: int) -> list[str]:
    """One-line tips from retrieved experiences, in retrieval order, distinct, at most `limit`."""
    tips: list[str] = []
    for scored in memories:
        if len(tips) >= limit:
            break
        e = scored.experience
        if not e.action:
            continue
        tip = f"in a similar state, '{e.action}' {_what_it_did(e)}"
        feedback = " ".join(e.feedback.split())
        if feedback:
            cut = feedback if len(feedback) <= MAX_FEEDBACK_CHARS else feedback[: MAX_FEEDBACK_CHARS - 3] + "..."
            tip += f"; the game answered: \"{cut}\""
        if tip not in tips:
            tips.append(tip)
    return tips
