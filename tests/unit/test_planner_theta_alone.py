"""θ alone (the `policy` agent) over a real CoinCollector game, the sandbox host in-process: each earlier
visit to where a candidate leads costs it `policy_revisit_penalty` of logit."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from evoskill.core.reward import Scorer
from evoskill.core.search_config import SearchConfig
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


def visits_of(penalty: float) -> list[int]:
    player = EpisodePlayer(HostSandbox(), SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)),
                           SearchConfig(), Scorer(RewardSettings()), east_and_west)
    config = planner_pb2.SearchConfig(agent="policy", policy_revisit_penalty=penalty)  # the request's, as eval sets it
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=20, config=config)
    list(player.play(request))
    return sorted(player.visited.values(), reverse=True)


@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_each_earlier_visit_costs_a_candidate_logit(penalty: float) -> None:
    visits = visits_of(penalty)
    if penalty == 0:
        assert visits == [10, 10]  # plain argmax: between two rooms until the step limit
    else:
        assert visits[0] <= 3 and len(visits) >= 8  # the same θ leaves the loop for doors and rooms it has not seen
