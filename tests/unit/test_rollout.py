"""The search's one rollout: random non-reading actions, discounted score gain, +1 for a win, -1 for a loss."""

from __future__ import annotations

import pytest

from evoskill.core.rollout import rollout
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2


class Corridor:
    """Walk east three times to win; each step east gains 0.25 of the score; `look` reads; `jump` loses."""

    def __init__(self, actions: list[str]) -> None:
        self.offered, self.position, self.won, self.lost = actions, 0, False, False

    @property
    def done(self) -> bool:
        return self.won or self.lost

    def valid_actions(self) -> list[str]:
        return list(self.offered)

    def template(self, action: str) -> str:
        return action

    def step(self, action: str) -> tuple[None, float]:
        self.lost = action == "jump"
        if action == "go east":
            self.position += 1
            self.won = self.position == 3
            return None, 0.25
        return None, 0.0


def test_reading_is_skipped_and_a_win_counts_one_more() -> None:
    total, taken = rollout(Corridor(["look", "go east"]), 10, 0.5, seed=0)
    assert taken == ["go east"] * 3
    assert total == pytest.approx(0.25 + 0.5 * 0.25 + 0.25 * (0.25 + 1.0))


def test_a_loss_costs_one_and_ends_it() -> None:
    total, taken = rollout(Corridor(["jump"]), 10, 0.9, seed=0)
    assert (total, taken) == (-1.0, ["jump"])
    assert rollout(Corridor(["look"]), 2, 0.9, seed=0) == (0.0, ["look", "look"])  # nothing else is left


def test_the_sandbox_runs_this_rollout() -> None:
    host, _ = EnvHost.open("twx:coin", 0, "test")
    fresh, _ = EnvHost.open("twx:coin", 0, "test")
    try:
        (probe,), _ = host.simulate([sandbox_pb2.Probe(actions=["move west"], rollout_depth=8, rollout_seed=3)], 0.9)
        fresh.env.step("move west")
        total, taken = rollout(fresh.env, 8, 0.9, seed=3)
        assert (probe.rollout_return, probe.rollout_steps) == (total, len(taken)) and taken
    finally:
        host.close()
        fresh.close()
