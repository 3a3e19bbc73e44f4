"""Advice on the search's priors as small composable transforms (mctx style): each maps one batch's
evaluation to a better one, and the search model applies them in order, starting from uniform priors and
value 0. θ gives the priors and the value of every state; retrieved memories tilt the root's priors by a
bounded logit bonus; the LLM's prior at each node it was asked at combines with them by a rule
(core/llm/priors.py). No advice removes a candidate.

Memories (seed 004 §2.2: memory guides the search): the retrieved experiences fused into a bonus for the
actions that worked in similar states and a penalty for those that failed (core/memory/fusion.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from evoskill.core.exploration import novelty_bonus
from evoskill.core.llm.priors import combine, llm_prior
from evoskill.core.memory.fusion import memory_bonus
from evoskill.core.search.model import Advice, Path, SearchModel
from evoskill.core.search.types import Evaluation
from evoskill.core.state_text import state_text
from evoskill.memory.v1 import memory_pb2

# (goal, observation, actions, templates) per state -> (logits per state, values)
PolicyFn = Callable[[Sequence[tuple[str, str, Sequence[str], Sequence[str]]]], tuple[list[np.ndarray], np.ndarray]]


def theta(policy: PolicyFn) -> Advice:
    """θ's priors and value; each state as the learner saw it in training (`state_text`: feedback, room,
    inventory, notes, and the last actions where θ was trained so; `candidate_text`: the candidates marked
    where they lead back to a visited state, and with the rooms they lead to where θ was trained so)."""

    def advise(model: SearchModel, states: Sequence[Path], evaluation: Evaluation) -> Evaluation:
        # as θ was trained (NetConfig.room_marks, recent_actions, scored_marks)
        rooms = bool(getattr(policy, "room_marks", False))
        recent = int(getattr(policy, "recent_actions", 0))
        scored = bool(getattr(policy, "scored_marks", False))
        inputs = [(*state_text(model.observation(s), model.notes_at(s), model.recent_at(s, recent)),
                   *model.candidates(s, rooms, scored)) for s in states]
        logits, values = policy(inputs)
        if evaluation.logits is not None:
            logits = [np.asarray(prior) + row for prior, row in zip(evaluation.logits, logits, strict=True)]
        return Evaluation(logits, np.asarray(evaluation.values, dtype=np.float64) + values)

    return advise


def root_bonus(bonus_at: Callable[[SearchModel], np.ndarray]) -> Advice:
    """A logit bonus per root candidate, computed when the root is evaluated (once per search)."""

    def advise(model: SearchModel, states: Sequence[Path], evaluation: Evaluation) -> Evaluation:
        if () not in states:
            return evaluation
        at = list(states).index(())
        logits: list[np.ndarray | None] = [None] * len(states) if evaluation.logits is None else list(evaluation.logits)
        logits[at] = with_logit_bonus(logits[at], bonus_at(model))
        return Evaluation([np.zeros(len(model.actions(s))) if row is None else row
                           for s, row in zip(states, logits, strict=True)], evaluation.values)

    return advise


def memories(retrieved: Sequence[memory_pb2.ScoredExperience], weight: float, similar_share: float = 1.0) -> Advice:
    """Experiences retrieved for the root's state vote for its candidates, this situation's own in full and the
    others at `similar_share` (core/memory/fusion.py)."""
    return root_bonus(lambda model: memory_bonus(model.actions(()), model.templates(()), retrieved, weight=weight,
                                                 similar_share=similar_share))


def llm_priors(rule: str, weight: float) -> Advice:
    """The LLM's prior at each node it ranked (`SearchModel.ranked`), combined with the priors so far by
    `rule` (core/llm/priors.py); a node it gave nothing for (a failed answer) keeps them as they are."""

    def advise(model: SearchModel, states: Sequence[Path], evaluation: Evaluation) -> Evaluation:
        if not any(model.ranked.get(s) for s in states):
            return evaluation
        rows: list[np.ndarray | None] = [None] * len(states) if evaluation.logits is None else list(evaluation.logits)
        out: list[np.ndarray] = []
        for state, row in zip(states, rows, strict=True):
            actions = model.actions(state)
            index = {a: i for i, a in enumerate(actions)}
            named = [index[a] for a in model.ranked.get(state, ()) if a in index]
            if named:
                row = combine(row, llm_prior(named, len(actions)), rule, weight)
            out.append(np.zeros(len(actions)) if row is None else np.asarray(row, dtype=np.float64))
        return Evaluation(out, evaluation.values)

    return advise


def stepped(model: SearchModel) -> list[bool]:
    """Per root candidate: its child was stepped, so where it leads is known."""
    return [(a,) in model.nodes for a in model.actions(())]


def visit_counts(visits: Callable[[str], int], tried: Callable[[str, str], int],
                 known: Callable[[SearchModel], Sequence[bool]] = stepped) -> Callable[[SearchModel], np.ndarray]:
    """Per root candidate, the episode's earlier real visits to where it leads; for an unstepped child (or one
    `known` leaves out), the times the episode took that action in the root's state or just before in a row
    (`EpisodeMemory.times_taken`)."""

    def counts(model: SearchModel) -> np.ndarray:
        here = model.nodes[()].state_key
        return np.array([visits(model.nodes[(a,)].state_key) if leads else tried(here, a)
                         for a, leads in zip(model.actions(()), known(model), strict=True)], dtype=np.float64)

    return counts


def revisits(visits: Callable[[str], int], penalty: float,
             tried: Callable[[str, str], int] = lambda state, action: 0) -> Advice:
    """Each earlier real visit to where a root candidate leads costs `penalty` of logit, as θ alone is
    charged (`search.policy_revisit_penalty`): θ's priors cloned from wandering gold paths otherwise keep
    search walking between two rooms, one real step after another."""
    counts = visit_counts(visits, tried)
    return root_bonus(lambda model: -penalty * counts(model))


def novelty(visits: Callable[[str], int], tried: Callable[[str, str], int], weight: float) -> Advice:
    """Count-based novelty at the root (`search.novelty_weight`): weight/(count+1) of logit per candidate, the
    counts as `revisits` reads them (core/exploration.py)."""
    counts = visit_counts(visits, tried)
    return root_bonus(lambda model: novelty_bonus(counts(model), weight))


def with_logit_bonus(logits: np.ndarray | None, bonus: np.ndarray) -> np.ndarray:
    """Add the bonus to one state's logits (None = uniform priors, i.e. zeros)."""
    if logits is None:
        return bonus.astype(np.float32)
    out = np.asarray(logits, dtype=np.float32).copy()
    out[: len(bonus)] += bonus.astype(np.float32)
    return out
