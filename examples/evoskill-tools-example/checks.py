"""A Python check: what a task's "check" names, called with the parameters it declares of answer, state,
trace (the calls and their results) and task; it returns a bool or a score in [0, 1]."""

from __future__ import annotations


def time_in_kolkata(answer: object) -> bool:
    """09:30 in Tokyo is 06:00 in Kolkata (neither has daylight saving time), whatever the date."""
    return isinstance(answer, str) and "06:00" in answer
