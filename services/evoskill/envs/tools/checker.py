"""The verdict on a final answer: the task's checkers, each a score in [0, 1], won when every one is 1.

``expected_answer``: equal after normalising (numbers within 1e-6 relative, strings without case or runs of
whitespace, objects and lists element by element). ``expected_state``: the share of its keys whose values the
end state has (a subset match). ``check``: a Python function the tool host runs (tool_runtime); it returns a
bool or a score. Pure apart from that one call, which the env passes in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evoskill.envs.tools.task import ToolTask


@dataclass(frozen=True)
class Verdict:
    won: bool
    score: float  # in [0, 1]
    notes: tuple[str, ...] = ()  # what each failing checker found
    external: bool = False  # a check that could not run (timeout, crash): not the agent's doing


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip().replace(",", ""))
        except ValueError:
            return None
    return None


def _text(v: str) -> str:
    return re.sub(r"\s+", " ", v.strip()).casefold()


def same(given: Any, expected: Any) -> bool:
    """Whether an answer equals the expected one (see the module docstring)."""
    a, b = _number(given), _number(expected)
    if a is not None and b is not None:
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(given, str) and isinstance(expected, str):
        return _text(given) == _text(expected)
    if isinstance(given, Mapping) and isinstance(expected, Mapping):
        return given.keys() == expected.keys() and all(same(given[k], expected[k]) for k in expected)
    if isinstance(given, list) and isinstance(expected, list):
        return len(given) == len(expected) and all(same(x, y) for x, y in zip(given, expected, strict=True))
    return bool(given == expected and type(given) is type(expected))


def state_share(state: Mapping[str, Any] | None, expected: Mapping[str, Any]) -> tuple[float, list[str]]:
    """The share of expected keys the state matches, and the keys it misses."""
    state = state or {}
    missed = [k for k, v in expected.items() if k not in state or not same(state[k], v)]
    return (1.0 - len(missed) / len(expected) if expected else 1.0), missed


def coerce_check(value: Any) -> float:
    """A check's return value as a score: a bool, or a number in [0, 1]."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and 0.0 <= value <= 1.0:
        return float(value)
    raise ValueError(f"returned {value!r}; a check returns a bool or a score in [0, 1]")


# run_check(answer, state, trace) -> score, raising ValueError (bad return) or ToolFailure-like RuntimeError
RunCheck = Callable[[Any, Any, list[dict[str, Any]]], float]


def verdict(task: ToolTask, answer: Any, answered: bool, state: Mapping[str, Any] | None,
            trace: list[dict[str, Any]], run_check: RunCheck) -> Verdict:
    scores: list[float] = []
    notes: list[str] = []
    external = False
    if task.has_expected_answer:
        ok = answered and same(answer, task.expected_answer)
        scores.append(1.0 if ok else 0.0)
        if not ok:
            notes.append("the answer is not the expected one" if answered else "no answer given")
    if task.expected_state is not None:
        share, missed = state_share(state, task.expected_state)
        scores.append(share)
        if missed:
            notes.append(f"the state differs at {', '.join(missed)}")
    if task.check is not None:
        try:
            score = run_check(answer if answered else None, state, trace)
        except ValueError as exc:
            score, notes = 0.0, [*notes, f"check {task.check} {exc}"]
        except RuntimeError as exc:  # it could not run: timed out, crashed
            score, external, notes = 0.0, True, [*notes, f"check {task.check} failed: {exc}"]
        else:
            if score < 1.0:
                notes.append(f"check {task.check} gave {score:.2f}")
        scores.append(score)
    score = sum(scores) / len(scores)
    return Verdict(won=all(s >= 1.0 for s in scores), score=score, notes=tuple(notes), external=external)
