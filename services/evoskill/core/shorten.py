"""Gold paths without the steps their outcome does not need, each change checked by playing it.

Environments hand out gold paths that wander: ScienceWorld's look around after every focus and wait one tick at
a time ("wait1" nine times where its "wait" does as well), and the suites cap an episode's steps
(identify-life-stages: 30, where its gold paths take 25-41). θ cloned on them learns the detours and runs out of
steps. Each change below is kept only where the environment says the path still wins with at least its score:

1. a run of one action repeated is replaced, from its start, by one listed action that is a shorter or longer
   form of it ("wait" for "wait1", "wait1" for "wait"), the longest prefix of the run it can stand for first;
2. then a step that changes nothing and tells nothing the agent did not see already (`Idle`: a look around, whose
   text the observation carries anyway) is left out.

A step that changes the world, or tells something new, stays even where the path wins without it: a gold path
wins in hindsight, and one that focuses on the right inclined plane without measuring them would teach θ to guess.
`Outcome` plays actions from the episode's start (stopping where it ends, a refused action ending it unwon);
`Listed` gives the actions listed after a prefix; `Idle` judges a path's step. Each costs environment steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Outcome = Callable[[Sequence[str]], tuple[bool, float]]  # actions → (won, final score)
Listed = Callable[[Sequence[str]], Sequence[str]]  # prefix → the actions listed where it leads
Idle = Callable[[Sequence[str], int], bool]  # (path, i) → path[i] changes nothing and tells nothing new


def shortened(path: Sequence[str], outcome: Outcome, listed: Listed, idle: Idle) -> list[str]:
    """`path` with runs replaced and idle steps left out wherever it still wins with at least its score; `path`
    as it is when it does not win."""
    won, score = outcome(path)
    if not won:
        return list(path)

    def keeps(candidate: Sequence[str]) -> bool:
        ok, got = outcome(candidate)
        return ok and got >= score

    kept = _runs_replaced(list(path), keeps, listed)
    i = 0
    while i < len(kept):
        candidate = kept[:i] + kept[i + 1 :]
        if idle(kept, i) and keeps(candidate):
            kept = candidate
        else:
            i += 1
    return kept


def _runs_replaced(path: list[str], keeps: Callable[[Sequence[str]], bool], listed: Listed) -> list[str]:
    i = 0
    while i < len(path):
        run = _run_length(path, i)
        if run >= 2:
            forms = [a for a in listed(path[:i]) if a != path[i] and _same_command(a, path[i])]
            replaced = next(((m, form) for m in range(run, 1, -1) for form in forms
                             if keeps([*path[:i], form, *path[i + m :]])), None)
            if replaced is not None:
                m, form = replaced
                path = [*path[:i], form, *path[i + m :]]
                continue  # what is left of the run may be replaced again
        i += max(run, 1)
    return path


def _run_length(path: Sequence[str], start: int) -> int:
    end = start
    while end < len(path) and path[end] == path[start]:
        end += 1
    return end - start


def _same_command(a: str, b: str) -> bool:
    """One a shorter or longer form of the other: "wait" / "wait1"; not "look" / "look around" (another word)."""
    shorter, longer = sorted((a, b), key=len)
    return longer.startswith(shorter) and " " not in longer[len(shorter) :]
