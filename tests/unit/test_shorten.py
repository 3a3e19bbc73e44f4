"""Gold-path shortening (core.shorten) on a toy clock: pure logic, the environment a function."""

from __future__ import annotations

from collections.abc import Sequence

from evoskill.core.shorten import Outcome, _same_command, shortened

TICKS = {"wait1": 1, "wait": 10}
LISTED = ["focus", "look", "measure", "wait", "wait1"]


def idle(path: Sequence[str], i: int) -> bool:
    return path[i] == "look"  # "measure" tells something: never left out


def clock(window: range) -> tuple[list[int], Outcome]:
    """A game won by focusing while the clock is in `window`; counts its plays."""
    plays: list[int] = []

    def outcome(actions: Sequence[str]) -> tuple[bool, float]:
        plays.append(len(actions))
        now = 0
        for action in actions:
            if action == "focus":
                return (now in window, 1.0 if now in window else 0.0)
            now += TICKS.get(action, 0)
        return (False, 0.0)

    return plays, outcome


def test_a_run_becomes_one_command_and_needless_steps_go() -> None:
    _, outcome = clock(range(10, 13))
    gold = ["look", *["wait1"] * 11, "look", "measure", "focus", "wait1"]
    assert shortened(gold, outcome, lambda prefix: LISTED, idle) == ["wait", "measure", "focus", "wait1"]


def test_a_change_that_loses_is_not_kept() -> None:
    _, outcome = clock(range(8, 10))  # "wait" (10 ticks) overshoots: the run stays, a wait1 is not idle
    gold = ["look", *["wait1"] * 9, "focus"]
    assert shortened(gold, outcome, lambda prefix: LISTED, idle) == [*["wait1"] * 9, "focus"]


def test_a_path_that_does_not_win_is_left_as_it_is() -> None:
    plays, outcome = clock(range(100, 101))
    gold = ["look", "wait1", "focus"]
    assert shortened(gold, outcome, lambda prefix: LISTED, idle) == gold
    assert plays == [3]  # one play: nothing to keep


def test_forms_of_one_command() -> None:
    assert _same_command("wait", "wait1") and _same_command("wait1", "wait")
    assert not _same_command("look", "look around") and not _same_command("open door", "close door")
