"""The search's one rollout: random non-reading actions, discounted score gain, +1 for a win, -1 for a loss;
and its value in the reward service's units (`Scorer.rollout`)."""

from __future__ import annotations

import pytest

from evoskill.core.reward import Scorer
from evoskill.core.rollout import rollout
from evoskill.platform.config import RewardSettings
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2


class Corridor:
    """Walk east three times to win; each step east gains 0.25 of the score; `look` reads; `jump` loses."""

    def __init__(self, actions: list[str]) -> None:
        self.offered, self.position, self.won, self.lost = actions, 0, False, False

    @property
    def done(self) -> bool:
        return self.won or self.lost

    @property
    def score(self) -> float:
        return 0.25 * self.position

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
    played = rollout(Corridor(["look", "go east"]), 10, 0.5, seed=0)
    assert played.taken == ["go east"] * 3
    assert played.total == pytest.approx(0.25 + 0.5 * 0.25 + 0.25 * (0.25 + 1.0))
    assert (played.outcome, played.final_score) == (0.25, 0.75)  # won on the third step, discount 0.5^2
    # In reward units: the score gain as the score_gain term (5), the win as an episode's winning last step
    # (task completed 1 + final answer 2 + completion 1), discounted alike.
    value = Scorer(RewardSettings()).rollout(played.score_gain, played.outcome, played.final_score)
    assert value == pytest.approx(5 * (0.25 + 0.5 * 0.25 + 0.25 * 0.25) + 0.25 * 4.0)


def test_a_loss_costs_one_and_ends_it() -> None:
    played = rollout(Corridor(["jump"]), 10, 0.9, seed=0)
    assert (played.total, played.taken) == (-1.0, ["jump"])
    # lost at score 0: safety -1 (weight 0.5) and completion 0 - 1 (weight 1), not five times the -1
    assert Scorer(RewardSettings()).rollout(played.score_gain, played.outcome, played.final_score) == -1.5
    looked = rollout(Corridor(["look"]), 2, 0.9, seed=0)
    assert (looked.total, looked.taken) == (0.0, ["look", "look"])  # nothing else is left


def test_the_sandbox_runs_this_rollout() -> None:
    host, _ = EnvHost.open("twx:coin", 0, "test")
    fresh, _ = EnvHost.open("twx:coin", 0, "test")
    try:
        (probe,), _ = host.simulate([sandbox_pb2.Probe(actions=["move west"], rollout_depth=8, rollout_seed=3)], 0.9)
        fresh.env.step("move west")
        played = rollout(fresh.env, 8, 0.9, seed=3)
        assert (probe.rollout_return, probe.rollout_steps) == (played.total, len(played.taken)) and played.taken
        assert (probe.rollout_outcome, probe.rollout_final_score) == (played.outcome, played.final_score)
    finally:
        host.close()
        fresh.close()
