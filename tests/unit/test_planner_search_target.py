"""What the planner's search teaches θ: Gumbel's improved policy as the target, and one reward scale."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evoskill.common.v1.common_pb2 import Action, Transition
from evoskill.core.learn import episode_examples
from evoskill.core.search import SearchConfig, search
from evoskill.events.v1.events_pb2 import EpisodeCompleted, EpisodeStep
from evoskill.planner.episode import search_env, search_target
from evoskill.planner.sandbox_search import SandboxSearch
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import SearchSettings, Settings
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2
from tests.unit.test_sandbox_search import CoreReward, HostSandbox


@pytest.fixture()
def coin() -> Any:
    host, _ = EnvHost.open("twx:coin", 0, "test")
    yield host
    host.close()


def test_gumbel_target_covers_every_valid_action_and_reaches_the_learner(coin: EnvHost) -> None:
    env = SandboxSearch(HostSandbox(coin), CoreReward(), "s", rollout_depth=4, revisit_penalty=0.5)
    result = search(env.root(), env.step, SearchConfig(algorithm="gumbel", num_simulations=8), env.evaluate,
                    step_batch=env.step_batch)
    target = search_target(result, env)
    valid = list(env.nodes[()].observation.valid_actions)
    assert list(target.actions) == valid and len(target.policy_probs) == len(valid)
    assert sum(target.policy_probs) == pytest.approx(1.0, abs=1e-6)
    probs = dict(zip(target.actions, target.policy_probs, strict=True))
    assert probs["inventory"] == 0.0  # a no-op: search never considered it
    assert all(probs[a] > 0 for a in env.actions(()))  # every candidate, visited or not
    assert sum(v > 0 for v in target.visit_probs) <= 8

    step = EpisodeStep(transition=Transition(before=env.nodes[()].observation, action=Action(text=valid[0])),
                       target=target, reward=0.0)
    (example,) = episode_examples(EpisodeCompleted(episode_id="e", steps=[step]))
    np.testing.assert_allclose(example.visit_probs, target.policy_probs, rtol=1e-6)  # distilled: the improved policy
    assert example.q_mask.tolist() == [v > 0 for v in target.visit_probs]  # Q targets: visited actions only


def test_puct_target_leaves_the_improved_policy_empty(coin: EnvHost) -> None:
    env = SandboxSearch(HostSandbox(coin), CoreReward(), "s", rollout_depth=0)
    result = search(env.root(), env.step, SearchConfig(num_simulations=8), env.evaluate, step_batch=env.step_batch)
    assert result.policy_target is None and not search_target(result, env).policy_probs


def policy(states: Sequence[tuple[str, str, Sequence[str], Sequence[str]]]) -> tuple[list[np.ndarray], np.ndarray]:
    return [np.zeros(len(s[2])) for s in states], np.full(len(states), 2.0)


@pytest.mark.parametrize(
    ("agent", "request_mix", "expected"),
    [("mcts", None, 1.0), ("policy+mcts", None, 0.5), ("policy+mcts", 0.25, 0.25)],
)
def test_value_head_weighs_in_where_theta_advises(agent: str, request_mix: float | None, expected: float) -> None:
    request = planner_pb2.SearchConfig(agent=agent)
    if request_mix is not None:
        request.value_mix = request_mix
    env = search_env(None, None, "s", request, SearchConfig(), SearchSettings(), policy)
    assert env.value_mix == expected
    assert (env.policy is not None) == (agent == "policy+mcts")


class FixedRollouts:
    """A sandbox whose every rollout returns 0.2: a fifth of a game's score, in the environment's units."""

    def Simulate(self, request: sandbox_pb2.SimulateRequest) -> sandbox_pb2.SimulateReply:
        return sandbox_pb2.SimulateReply(results=[sandbox_pb2.ProbeResult(rollout_return=0.2) for _ in request.probes])


def test_rollouts_are_scored_in_reward_units() -> None:
    env = SandboxSearch(FixedRollouts(), None, "s", value_mix=1.0, rollout_scale=5.0)
    np.testing.assert_allclose(env.evaluate([("a",), ("b",)]).values, [1.0, 1.0])  # 0.2 of a game = 1 reward unit
    assert Settings().search.rollout_scale == Settings().reward.score_gain  # the reward service's scale
    assert Settings(reward={"score_gain": 2.0}).search.rollout_scale == 2.0
    assert Settings(reward={"score_gain": 2.0}, search={"rollout_scale": 1.0}).search.rollout_scale == 1.0
