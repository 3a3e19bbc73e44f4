"""Candidates beyond the environment's list: the actions θ was shown by demonstrations that no valid-action
list named (ScienceWorld never lists "pick up seed jar", which every grow-plant gold path takes).

θ's file carries them (core/learn/train.py counts them, the most trained on first). At each node the search
model opens, the ones whose words the state names — in its listed actions or its text — are proposed, as an
LLM's new actions are (`SearchModel._ask`): the environment steps each, one it refuses or that changes
nothing is dropped, and the rest join the node's candidates for θ to score. Proposing costs an environment
step per plausible action per node, and nothing where the state names none of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evoskill.core.llm.prompt import LlmAnswer
from evoskill.core.search.model import Path, ProposeFn, SearchModel
from evoskill.envs.base import heuristic_template

_WORDS = re.compile(r"[a-z0-9]+")


def object_words(action: str) -> frozenset[str]:
    """The words `action` names beyond its skill's (`heuristic_template`): "pick up seed jar" -> {seed, jar}."""
    skill = set(_WORDS.findall(heuristic_template(action).lower()))
    return frozenset(w for w in _WORDS.findall(action.lower()) if w not in skill)


def plausible(actions: Sequence[str], listed: Sequence[str], text: str) -> list[str]:
    """The `actions` not in `listed` whose object words all appear in `listed` or `text` (a state's words)."""
    named = set(_WORDS.findall(" ".join([*listed, text]).lower()))
    here = set(listed)
    return [a for a in actions if a not in here and object_words(a) <= named]


def demonstrations(actions: Sequence[str]) -> ProposeFn:
    """`SearchModel.propose` offering `actions` where plausible (no ranking: θ and search judge them)."""

    def propose(model: SearchModel, path: Path) -> LlmAnswer | None:
        observation = model.observation(path)
        text = " ".join((observation.text, observation.look, observation.inventory))
        new = plausible(actions, observation.valid_actions, text)
        return LlmAnswer(new=new) if new else None

    return propose


def together(first: ProposeFn | None, second: ProposeFn | None) -> ProposeFn | None:
    """Both proposers at each node: the new actions of both, the first's ranking (the LLM's)."""
    if first is None or second is None:
        return first or second
    one, other = first, second

    def propose(model: SearchModel, path: Path) -> LlmAnswer | None:
        a, b = one(model, path), other(model, path)
        if a is None or b is None:
            return a or b
        return LlmAnswer(ranked=a.ranked, new=list(dict.fromkeys([*a.new, *b.new])), rejected=a.rejected)

    return propose
