"""A `Retrieval` as one Qdrant query: a prefetch (vector recall under payload filters) and a formula that
re-scores the recalled points (core/memory/retrieval.py has the score). The same request runs in local
mode and on a Qdrant server or cluster; with payload indexes (a server) the filters are index lookups, the
hierarchical index of seed 004 §5.1: family, skill and outcome first, vectors within them.
"""

from __future__ import annotations

from qdrant_client import models

from evoskill.core.errors import InvalidInput
from evoskill.core.memory import Retrieval, novelty_penalties
from evoskill.core.memory.experience import OUTCOMES
from evoskill.memory.v1 import memory_pb2

# Payload fields retrieval filters on, and their index types (created on a server; see store.py).
INDEXED_FIELDS: dict[str, models.PayloadSchemaType] = {
    "env_family": models.PayloadSchemaType.KEYWORD,
    "env_spec": models.PayloadSchemaType.KEYWORD,
    "template": models.PayloadSchemaType.KEYWORD,
    "outcome": models.PayloadSchemaType.KEYWORD,
    "action": models.PayloadSchemaType.KEYWORD,
    "episode_id": models.PayloadSchemaType.KEYWORD,
    "session_id": models.PayloadSchemaType.KEYWORD,
    "reward_unit": models.PayloadSchemaType.FLOAT,
    "time_unix_ms": models.PayloadSchemaType.INTEGER,  # stats' oldest and newest (order_by needs an index)
}
# The cold collection's (summaries, gone-cold episodes): the same filters, and what stats orders by.
COLD_INDEXED_FIELDS: dict[str, models.PayloadSchemaType] = {
    **{name: INDEXED_FIELDS[name] for name in ("env_family", "env_spec", "template", "outcome", "action",
                                               "reward_unit", "time_unix_ms")},
    "first_unix_ms": models.PayloadSchemaType.INTEGER,
    "kind": models.PayloadSchemaType.KEYWORD,
    "state": models.PayloadSchemaType.KEYWORD,  # a gone-cold episode's: moving, then cold (store.py)
}
# What a point stored before these fields existed counts as.
FORMULA_DEFAULTS = {"reward_unit": 0.0, "outcome_value": 0.0}


def matches(key: str, value: str) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def matches_any(key: str, values: list[str]) -> models.FieldCondition:
    return models.FieldCondition(key=key, match=models.MatchAny(any=values))


def field_conditions(fields: dict[str, str], outcomes: tuple[str, ...] = ()) -> list[models.Condition]:
    """Each set field matched exactly, and the outcome one of `outcomes` (payload names) when any."""
    must: list[models.Condition] = [matches(key, value) for key, value in fields.items() if value]
    if outcomes:
        must.append(matches_any("outcome", list(outcomes)))
    return must


def filter_conditions(flt: memory_pb2.MemoryFilter) -> list[models.Condition]:
    """A List or Delete filter as conditions (none: every unit)."""
    bad = [o for o in flt.outcomes if o not in OUTCOMES]
    if bad:
        raise InvalidInput(f"filter.outcomes holds values that are no Outcome: {bad}")
    fields = {name: getattr(flt, name) for name in ("env_spec", "env_family", "episode_id", "template", "session_id")}
    return field_conditions(fields, tuple(OUTCOMES[o] for o in flt.outcomes))


def recall_filter(retrieval: Retrieval, spec_filtered: bool = True) -> models.Filter | None:
    """The first stage's payload filter: environment (unless every point is known to hold the one asked for:
    `spec_filtered` False), family, skill, outcome; and for alternatives (seed 004 §2.2: similar situation,
    different action, acceptable outcome) none of the session's actions, not lost, a reward >= 0."""
    must = field_conditions({"env_spec": retrieval.env_spec if spec_filtered else "",
                             "env_family": retrieval.env_family, "template": retrieval.template},
                            retrieval.outcomes)
    must_not: list[models.Condition] = []
    if retrieval.alternatives:
        taken = sorted(set(retrieval.taken_actions))
        if taken:
            must_not.append(matches_any("action", taken))
        must_not.append(matches("outcome", "lost"))
        must.append(models.FieldCondition(key="reward_unit", range=models.Range(gte=0.0)))
    if not must and not must_not:
        return None
    return models.Filter(must=must or None, must_not=must_not or None)


def weighted(weight: float, expression: models.Expression) -> models.MultExpression:
    return models.MultExpression(mult=[weight, expression])


def rescore(retrieval: Retrieval) -> models.FormulaQuery:
    """The second stage: `$score` (the prefetch's cosine similarity) plus the weighted terms. Novelty is
    its weight minus, per group of actions the session took equally often, the part of it they lose."""
    w = retrieval.weights
    terms: list[models.Expression] = ["$score"]
    if w.reward:
        terms.append(weighted(w.reward, "reward_unit"))
    if w.outcome:
        terms.append(weighted(w.outcome, "outcome_value"))
    if w.novelty:
        terms.append(w.novelty)
        terms += [weighted(-w.novelty * lost, matches_any("action", actions))
                  for lost, actions in novelty_penalties(retrieval.taken_actions)]
    return models.FormulaQuery(formula=models.SumExpression(sum=terms), defaults=FORMULA_DEFAULTS)


def prefetch(retrieval: Retrieval, vector: list[float], using: str, spec_filtered: bool = True) -> models.Prefetch:
    return models.Prefetch(query=vector, using=using, filter=recall_filter(retrieval, spec_filtered),
                           limit=retrieval.candidates)
