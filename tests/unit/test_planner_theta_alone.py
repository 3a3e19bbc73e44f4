"""θ alone (the `policy` agent) over a real CoinCollector game, the sandbox host in-process: each earlier
visit to where a candidate leads costs it `policy_revisit_penalty` of logit."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evoskill.core.reward import Scorer
from evoskill.core.search_config import SearchConfig
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import RewardSettings
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2


class HostSandbox:
    """The sandbox service's session calls without the transport, over one EnvHost."""

    host: EnvHost

    def CreateSession(self, request: Any, timeout: float = 0) -> Any:
        self.host, obs = EnvHost.open(request.env_spec, request.seed, request.fold)
        return SimpleNamespace(session_id="s", observation=obs, gold_path=[])

    def Step(self, request: Any) -> Any:
        return SimpleNamespace(transition=self.host.step(request.action))

    def Simulate(self, request: Any) -> sandbox_pb2.SimulateReply:
        results, steps = self.host.simulate(list(request.probes), request.gamma)
        return sandbox_pb2.SimulateReply(results=results, env_steps=steps)

    def CloseSession(self, request: Any) -> None:
        self.host.close()


Batch = Sequence[tuple[str, str, Sequence[str], Sequence[str]]]


def east_and_west(batch: Batch) -> tuple[list[np.ndarray], np.ndarray]:
    """A θ that loves walking east and west, whatever it reads."""
    prefer = {"move west": 2.0, "move east": 1.5}
    return [np.array([prefer.get(a.split(" (")[0], 0.0) for a in actions]) for _, _, actions, _ in batch], \
        np.zeros(len(batch))


def visits_of(penalty: float, prefetch: bool = True) -> list[int]:
    player = EpisodePlayer(HostSandbox(), SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)),
                           SearchConfig(), Scorer(RewardSettings()), east_and_west)
    config = planner_pb2.SearchConfig(agent="policy", policy_revisit_penalty=penalty,  # the request's, as eval sets it
                                      prefetch_children=1 if prefetch else 0)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=20, config=config)
    list(player.play(request))
    return sorted(player.episode.visited.values(), reverse=True)


@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_each_earlier_visit_costs_a_candidate_logit(penalty: float) -> None:
    visits = visits_of(penalty)
    if penalty == 0:
        assert visits == [10, 10]  # plain argmax: between two rooms until the step limit
    else:
        assert visits[0] <= 3 and len(visits) >= 8  # the same θ leaves the loop for doors and rooms it has not seen


def test_unstepped_candidates_are_charged_for_the_times_they_were_taken_here() -> None:
    """ScienceWorld's children are not stepped (`prefetch_children=0`), so θ cannot see where a candidate
    leads; taking it again in a state where it was taken is charged instead."""
    assert visits_of(0.0, prefetch=False) == [10, 10]
    visits = visits_of(1.0, prefetch=False)
    assert visits[0] <= 3 and len(visits) >= 8


class FailuresOfWalking:
    """A memory that remembers walking east or west as failures (lost episodes, negative rewards)."""

    def __init__(self) -> None:
        self.requests: list[memory_pb2.RetrieveRequest] = []

    def Retrieve(self, request: memory_pb2.RetrieveRequest, timeout: float | None = None) -> memory_pb2.RetrieveReply:
        self.requests.append(request)
        lost = [memory_pb2.Experience(action=a, reward=-1.0, outcome=memory_pb2.OUTCOME_LOST)
                for a in ("move west", "move east")]
        return memory_pb2.RetrieveReply(results=[memory_pb2.ScoredExperience(experience=e, similarity=1.0)
                                                 for e in lost])


def test_remembered_failures_turn_theta_alone_away_from_them() -> None:
    memory = FailuresOfWalking()
    player = EpisodePlayer(HostSandbox(), SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)),
                           SearchConfig(), Scorer(RewardSettings()), east_and_west, memory=memory)
    # Memories of other situations (these have no task) at the weight of own ones: the test is on the bonus's sign.
    config = planner_pb2.SearchConfig(agent="policy", memory_weight=3.0, memory_profile="exploratory",
                                      memory_similar_share=1.0)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=3, config=config)
    taken = [u.action for u in player.play(request) if u.action]
    assert taken and not {"move west", "move east"} & set(taken)  # θ's favourites, remembered as failures
    assert [list(r.taken_actions) for r in memory.requests] == [taken[:i] for i in range(len(taken))]
    assert {r.profile for r in memory.requests} == {"exploratory"}


class OneOwnAttempt:
    """A memory holding one won attempt of `move east` in the very state asked about, in the game of `seed`, and
    a dozen won `move west` steps in similar rooms of other games."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def Retrieve(self, request: memory_pb2.RetrieveRequest, timeout: float | None = None) -> memory_pb2.RetrieveReply:
        def won(action: str, seed: int, similarity: float) -> memory_pb2.ScoredExperience:
            experience = memory_pb2.Experience(action=action, env_spec=request.env_spec, seed=seed, goal=request.goal,
                                               state=request.state, outcome=memory_pb2.OUTCOME_WON, success=True)
            own = request.HasField("seed") and request.seed == seed  # as the memory service flags them
            return memory_pb2.ScoredExperience(experience=experience, similarity=similarity, own=own)

        return memory_pb2.RetrieveReply(results=[won("move east", self.seed, 1.0),
                                                 *(won("move west", s, 0.95) for s in range(100, 112))])


@pytest.mark.parametrize(("remembered_in", "first"), [(0, "move east"), (1, "move west")])
def test_the_games_own_memory_of_this_state_outweighs_similar_rooms(remembered_in: int, first: str) -> None:
    player = EpisodePlayer(HostSandbox(), SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)),
                           SearchConfig(), Scorer(RewardSettings()), east_and_west, memory=OneOwnAttempt(remembered_in))
    config = planner_pb2.SearchConfig(agent="policy", memory_weight=1.0)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=1, config=config)
    assert [u.action for u in player.play(request) if u.action] == [first]


class Overlapping(HostSandbox):
    """The host sandbox and a memory that each answer only while the other is busy: the step's children are
    stepped only once a retrieval has started, and the retrieval answers only once they are being stepped.
    Done one after the other (in either order), the first to be called times out."""

    def __init__(self) -> None:
        self.simulating, self.retrieving, self.served = threading.Event(), threading.Event(), 0

    def Simulate(self, request: Any) -> sandbox_pb2.SimulateReply:
        self.simulating.set()
        if not self.retrieving.wait(timeout=30.0):
            raise TimeoutError("the children were stepped before the retrieval started")
        return super().Simulate(request)

    def Retrieve(self, request: memory_pb2.RetrieveRequest, timeout: float | None = None) -> memory_pb2.RetrieveReply:
        self.retrieving.set()
        if not self.simulating.wait(timeout=30.0):
            raise TimeoutError("the children were not stepped while the retrieval ran")
        self.served += 1
        return memory_pb2.RetrieveReply()


@pytest.mark.parametrize("agent", ["policy", "policy+mcts"])
def test_retrieval_runs_while_the_steps_children_are_stepped(agent: str) -> None:
    both = Overlapping()
    player = EpisodePlayer(both, SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)), SearchConfig(),
                           Scorer(RewardSettings()), east_and_west, memory=both)
    config = planner_pb2.SearchConfig(agent=agent, memory_weight=1.0, num_simulations=2)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=1, config=config)
    assert [u.action for u in player.play(request) if u.action]
    assert both.served == 1
