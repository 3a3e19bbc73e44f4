"""The reward of one step as every caller computes it: the reward service (its `Score` RPC and the
`step.executed` consumer) and search, which scores the steps it imagines in-process, without a call."""

from __future__ import annotations

from dataclasses import dataclass

from evoskill.common.v1.common_pb2 import Transition
from evoskill.core.errors import InvalidInput
from evoskill.core.reward.terms import DEFAULT_MAX_STEPS, outcome_reward, score_transition
from evoskill.platform.config import RewardSettings, Settings
from evoskill.reward.v1.reward_pb2 import RewardBreakdown


@dataclass(frozen=True)
class Scorer:
    weights: RewardSettings
    max_steps: int = DEFAULT_MAX_STEPS  # the efficiency term spends 1/max_steps per step

    @classmethod
    def for_settings(cls, settings: Settings) -> Scorer:
        return cls(settings.reward, settings.search.max_episode_steps)

    def __call__(self, transition: Transition) -> RewardBreakdown:
        if not transition.action.text:
            raise InvalidInput("transition.action.text is empty: nothing to score")
        return score_transition(transition, self.weights, max_steps=self.max_steps)

    def total(self, transition: Transition) -> float:
        return self(transition).total

    def rollout(self, score_gain: float, outcome: float, final_score: float) -> float:
        """A rollout's return (`core.rollout.Rollout`) in these reward units, the scale of search's edges and of
        V_θ's targets: its discounted score gain weighs what the score_gain term does, and a game it won or
        lost (`outcome`: that step's discount, > 0 won) earns what `outcome_reward` gives, discounted alike.
        The terms that need the episode's history (tool success, loops, curiosity) are left out."""
        value = self.weights.score_gain * score_gain
        if outcome:
            value += abs(outcome) * outcome_reward(outcome > 0, outcome < 0, final_score, self.weights)
        return value
