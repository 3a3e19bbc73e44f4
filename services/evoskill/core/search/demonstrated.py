"""Candidates beyond the environment's list: the actions θ was shown by demonstrations that no valid-action
list named (ScienceWorld never lists "pick up seed jar", which every grow-plant gold path takes).

θ's file carries them (core/learn/train.py counts them, the most trained on first). At each node the search
model opens, the ones whose words the state names — in its listed actions or its text — are proposed, as an
LLM's new actions are (`SearchModel._ask`): the environment steps each, one it refuses or that changes
nothing is dropped, and the rest join the node's candidates for θ to score. Proposing costs an environment
step per plausible action per node, and nothing where the state names none of them.
"""

from __future__ import annotations

from collections.abc import Sequence

from evoskill.core.llm.prompt import LlmAnswer
from evoskill.core.reward.history import action_arguments, words
from evoskill.core.search.model import Path, ProposeFn, SearchModel
from evoskill.envs.base import heuristic_template

Named = Sequence[tuple[str, frozenset[str]]]  # each action with the words it names beyond its skill's


def named(actions: Sequence[str]) -> Named:
    """Each action with its arguments ("pick up seed jar" -> {seed, jar}), read once, not at every node."""
    return [(a, action_arguments(a, heuristic_template(a))) for a in actions]


def plausible(actions: Named, listed: Sequence[str], text: str) -> list[str]:
    """The `actions` not in `listed` whose arguments all appear in `listed` or `text` (a state's words)."""
    said, here = words(" ".join([*listed, text])), set(listed)
    return [a for a, arguments in actions if a not in here and arguments <= said]


def demonstrations(actions: Sequence[str]) -> ProposeFn:
    """`SearchModel.propose` offering `actions` where plausible (no ranking: θ and search judge them)."""
    candidates = named(actions)

    def propose(model: SearchModel, path: Path) -> LlmAnswer | None:
        observation = model.observation(path)
        text = " ".join((observation.text, observation.look, observation.inventory))
        new = plausible(candidates, observation.valid_actions, text)
        return LlmAnswer(new=new) if new else None

    return propose


def together(first: ProposeFn | None, second: ProposeFn | None) -> ProposeFn | None:
    """Both proposers at each node: the new actions of both, the first's ranking (the LLM's)."""
    if first is None or second is None:
        return first or second
    return _both(first, second)


def _both(first: ProposeFn, second: ProposeFn) -> ProposeFn:
    def propose(model: SearchModel, path: Path) -> LlmAnswer | None:
        a, b = first(model, path), second(model, path)
        if a is None or b is None:
            return a or b
        return LlmAnswer(ranked=a.ranked, new=list(dict.fromkeys([*a.new, *b.new])), rejected=a.rejected)

    return propose
