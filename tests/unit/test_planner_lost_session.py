"""A sandbox that loses the episode's session mid-episode (it restarted, or the environment's worker crashed)
makes the episode UNAVAILABLE, which a workflow retries, not NOT_FOUND, which it takes for its own mistake and
fails on; the close that follows, failing too, does not hide that."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from evoskill.core.errors import Unavailable
from evoskill.core.reward import Scorer
from evoskill.core.search_config import SearchConfig
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import RewardSettings
from tests.rpc_status import RpcStatus
from tests.unit.test_planner_theta_alone import HostSandbox


class RestartedSandbox(HostSandbox):
    """Plays `steps` real steps, then answers what a restarted sandbox answers for a session it never had."""

    def __init__(self, steps: int, code: grpc.StatusCode, details: str) -> None:
        self.steps, self.code, self.details, self.close_calls = steps, code, details, 0

    def Step(self, request: Any) -> Any:
        if self.steps == 0:
            raise RpcStatus(self.code, self.details)
        self.steps -= 1
        return super().Step(request)

    def CloseSession(self, request: Any) -> None:
        self.close_calls += 1
        raise RpcStatus(grpc.StatusCode.NOT_FOUND, f"no session {request.session_id!r} (closed, expired, ...)")


def play(sandbox: RestartedSandbox) -> None:
    player = EpisodePlayer(sandbox, SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)), SearchConfig(),
                           Scorer(RewardSettings()))
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=10,
                                             config=planner_pb2.SearchConfig(agent="random"))
    list(player.play(request))


def test_a_session_lost_mid_episode_is_unavailable_and_the_failed_close_hides_nothing() -> None:
    sandbox = RestartedSandbox(2, grpc.StatusCode.NOT_FOUND, "no session 's' (closed, expired, or its worker crashed)")
    with pytest.raises(Unavailable, match=r"lost the episode's session.*no session 's'"):
        play(sandbox)
    assert sandbox.close_calls == 1


@pytest.mark.parametrize("code, details", [(grpc.StatusCode.NOT_FOUND, "no environment 'twx:nothing'"),
                                           (grpc.StatusCode.UNAVAILABLE, "connection refused")])
def test_other_failures_keep_their_status(code: grpc.StatusCode, details: str) -> None:
    with pytest.raises(RpcStatus) as failed:
        play(RestartedSandbox(1, code, details))
    assert failed.value.code() == code
