"""Search's curiosity from θ's dynamics model (`search.curiosity_weight`), on a two-way toy world: the edge
into what the model does not predict earns more; with the weight at 0 nothing changes, bit for bit."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evoskill.common.v1.common_pb2 import Action, Observation, Transition
from evoskill.core.exploration import curiosity_changed
from evoskill.core.reward import Scorer
from evoskill.core.reward.curiosity import DynamicsCuriosity, dynamics_batch
from evoskill.core.reward.dynamics import DynamicsWeights
from evoskill.core.search import SearchConfig
from evoskill.core.search.model import SearchModel, SimulateFn
from evoskill.platform.config import RewardSettings
from evoskill.sandbox.v1 import sandbox_pb2

ACTIONS = ["open fridge", "go cellar"]
ROOT = "You are in the kitchen. A fridge stands here."
TEXTS = {(): ROOT, ("open fridge",): "You open the fridge.", ("go cellar",): "You go down to the cellar."}
FAMILIAR = (ROOT, "open fridge", TEXTS[("open fridge",)])


def world(fridge_gain: float = 0.0, ends: bool = False) -> SimulateFn:
    """The kitchen's `simulate`: each path's observation; opening the fridge gains `fridge_gain` of score, and
    with `ends` each step ends the game (so a root action's Q is its edge reward alone)."""

    def observation(path: tuple[str, ...]) -> Observation:
        score = fridge_gain if path[:1] == ("open fridge",) else 0.0
        return Observation(text=TEXTS.get(path, " ".join(path)), valid_actions=ACTIONS, score=score,
                           done=ends and bool(path), won=ends and bool(path))

    def simulate(probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        results = []
        for probe in probes:
            path = tuple(probe.actions)
            before, after = observation(path[:-1]), observation(path)
            step = Transition(before=before, action=Action(text=path[-1]), after=after,
                              env_reward=after.score - before.score) if path else Transition()
            results.append(sandbox_pb2.ProbeResult(transition=step, observation=after, templates=ACTIONS,
                                                   state_key="|".join(path)))
        return results, len(probes)

    return simulate


@dataclass(frozen=True)
class CountingWeights(DynamicsWeights):
    calls: list[int] = field(default_factory=list)

    def surprise(self, transitions: Sequence[tuple[str, str, str]]) -> np.ndarray:
        self.calls.append(len(transitions))
        return super().surprise(transitions)


def trained_weights() -> CountingWeights:
    """A dynamics model that has seen the fridge open, and never the cellar."""
    curiosity = DynamicsCuriosity(64, 64, lr=1e-2, seed=1)
    batch = dynamics_batch([FAMILIAR], 64)
    for _ in range(80):
        curiosity.update(batch)
    weights = curiosity.weights()
    return CountingWeights(weights.state_dim, weights.action_dim, weights.layers)


def kitchen(weight: float, dynamics: DynamicsWeights | None, **world_args: Any) -> SearchModel:
    config = SearchConfig(curiosity_weight=weight, revisit_penalty=0.0, rollout_depth=0, num_simulations=16,
                          dirichlet_weight=0.0)
    return SearchModel(world(**world_args), Scorer(RewardSettings()), config, dynamics=dynamics)


def edge_rewards(weight: float, dynamics: DynamicsWeights | None) -> tuple[list[float], SearchModel]:
    env = kitchen(weight, dynamics)
    env.root()
    return [env.step((), i).reward for i in range(len(env.actions(())))], env


def test_an_unfamiliar_observation_earns_a_larger_edge_reward() -> None:
    dynamics = trained_weights()
    plain, _ = edge_rewards(0.0, None)
    curious, env = edge_rewards(0.5, dynamics)
    fridge, cellar = ACTIONS.index("open fridge"), ACTIONS.index("go cellar")
    assert plain[fridge] == plain[cellar]
    assert curious[cellar] > curious[fridge] > plain[fridge]
    assert env.surprise[("go cellar",)] > 2 * env.surprise[("open fridge",)]
    assert curious[cellar] - plain[cellar] == 0.5 * env.surprise[("go cellar",)]
    assert dynamics.calls[0] == len(ACTIONS)  # the root's children in one batched call


def test_off_the_edge_rewards_are_the_scorers_bit_for_bit() -> None:
    plain, _ = edge_rewards(0.0, None)
    dynamics = trained_weights()
    off, env = edge_rewards(0.0, dynamics)
    assert off == plain and not env.surprise and not dynamics.calls
    no_model, env = edge_rewards(0.5, None)  # a θ published without a dynamics model
    assert no_model == plain and not env.curious


def test_curiosity_changed_the_choice_only_where_the_bonus_decided_it() -> None:
    q = np.array([1.0, 1.2, np.nan])
    assert curiosity_changed(q, np.array([0.0, 0.4, 0.0]), chosen=1)  # 0.8 without its bonus: action 0 leads
    assert not curiosity_changed(q, np.array([0.0, 0.1, 0.0]), chosen=1)  # leads either way
    assert not curiosity_changed(q, np.array([0.0, 0.4, 0.0]), chosen=0)  # not the bonus's pick
    assert not curiosity_changed(np.array([1.0, np.nan]), np.array([0.5, 0.0]), chosen=0)  # nothing to compare


def test_a_choice_the_bonus_made_is_told_from_one_it_did_not() -> None:
    """Opening the fridge scores; the cellar is what the model cannot predict. Each step ends the game, so a root
    action's Q is its edge's reward: the bonus outweighs the score, and the search's choice is curiosity's."""
    dynamics = trained_weights()
    plain = kitchen(0.0, dynamics, fridge_gain=0.1, ends=True)
    chosen = plain.run()
    assert plain.actions(())[chosen.action] == "open fridge" and not plain.curiosity_chose(chosen)
    curious = kitchen(2.0, dynamics, fridge_gain=0.1, ends=True)
    result = curious.run()
    assert curious.actions(())[result.action] == "go cellar" and curious.curiosity_chose(result)
    small = kitchen(0.01, dynamics, fridge_gain=0.1, ends=True)  # too small a bonus to matter
    result = small.run()
    assert small.actions(())[result.action] == "open fridge" and not small.curiosity_chose(result)


def test_the_planners_search_scores_curiosity_without_loading_torch() -> None:
    code = "import sys, evoskill.core.search.model, evoskill.planner.agents; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
