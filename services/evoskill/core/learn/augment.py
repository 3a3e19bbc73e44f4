"""Renamed worlds: a training step whose taken action names an object of the goal is shown again with that
object's word swapped, everywhere in the step, for another object's word.

Cloned on a handful of demonstrations (ScienceWorld's protocol trains on 5 variations), θ learns the
training variations' names ("focus on egg turtle") instead of the rule (focus on the animal the goal
names), and at test it focuses on the turtle where the goal asks for the parrot. Swapping "turtle" and
"parrot" through the goal, the observation and every candidate is the same step in a world whose names
differ, so its demonstrated action is still right, and only matching the candidate to the goal predicts
it. Nothing here knows an environment: a name is a word the goal and the taken action share that no
candidate starts with (verbs do), and the swap partners are the other steps' names, else the step's own
candidates' words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"[a-z]+")
_MIN_LETTERS = 3  # "on", "to", "a" are never names
# " (been there)" is the revisit mark serving adds to a candidate (state_text.SEEN_MARK)
_STOP = frozenset({"the", "and", "with", "from", "into", "onto", "your", "task", "that", "this", "then", "you", "are",
                   "for", "its", "been", "there"})


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def goal_names(goal: str, candidates: Sequence[str], taken: int) -> list[str]:
    """The words of the taken candidate that the goal also says, less verbs (any candidate's first word),
    short and stop words; in the action's order. [] when nothing was taken."""
    if not 0 <= taken < len(candidates):
        return []
    verbs = {words[0] for words in map(_words, candidates) if words}
    said = set(_words(goal))
    names = [w for w in _words(candidates[taken])
             if w in said and w not in verbs and w not in _STOP and len(w) >= _MIN_LETTERS]
    return list(dict.fromkeys(names))


def swap_words(text: str, mapping: dict[str, str]) -> str:
    """`text` with every whole word that is a key of `mapping` (any case) replaced by its value."""
    if not mapping:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True))) + r")\b",
                         re.IGNORECASE)
    return pattern.sub(lambda m: mapping[m.group(0).lower()], text)


def renamed_step(goal: str, observation: str, candidates: Sequence[str], taken: int, partners: Sequence[str],
                 rng: np.random.Generator) -> tuple[str, str, list[str]] | None:
    """The step with each goal name swapped (both ways, so the renamed world stays consistent) for a partner
    word: a word of the step's candidates the goal does not say (the room's other objects: the turtle becomes
    the distractor) or one of `partners` (other steps' names). None when the step has no name or no partner."""
    names = goal_names(goal, candidates, taken)
    if not names:
        return None
    said = set(_words(goal))
    verbs = {words[0] for words in map(_words, candidates) if words}
    own = (w for c in candidates for w in _words(c) if w not in said and w not in verbs and w not in _STOP
           and len(w) >= _MIN_LETTERS)
    choices = [w for w in dict.fromkeys([*own, *partners]) if w not in names]
    if not choices:
        return None
    picked = rng.choice(len(choices), size=min(len(names), len(choices)), replace=False)
    mapping: dict[str, str] = {}
    for name, index in zip(names, picked, strict=False):
        partner = choices[int(index)]
        mapping[name], mapping[partner] = partner, name
    return swap_words(goal, mapping), swap_words(observation, mapping), [swap_words(c, mapping) for c in candidates]


def rename_batch(states: list[tuple[str, str]], candidates: list[list[tuple[str, str]]], taken: Sequence[int],
                 share: float, rng: np.random.Generator) -> tuple[list[tuple[str, str]], list[list[tuple[str, str]]]]:
    """A training batch with about `share` of its steps renamed (`renamed_step`), their partners drawn from
    the other steps' names. Templates (skills) are kept: renaming an object does not change the skill."""
    if share <= 0:
        return states, candidates
    texts = [[text for text, _ in row] for row in candidates]
    names = [goal_names(goal, row, t) for (goal, _), row, t in zip(states, texts, taken, strict=True)]
    states, candidates = list(states), list(candidates)
    for i in map(int, np.flatnonzero(rng.random(len(states)) < share)):
        partners = [w for j, row in enumerate(names) if j != i for w in row]
        renamed = renamed_step(*states[i], texts[i], taken[i], partners, rng)
        if renamed is not None:
            goal, observation, row = renamed
            states[i] = (goal, observation)
            candidates[i] = [(text, template) for text, (_, template) in zip(row, candidates[i], strict=True)]
    return states, candidates
