"""gRPC helpers over real sockets: deadlines, status mapping, health, safe retries."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput, NotFound
from evoskill.platform.config import GrpcSettings
from evoskill.platform.deadlines import call_deadline
from evoskill.platform.rpc import channel, check_health, rpc_method, service_config, start_server, sync_channel
from evoskill.reward.v1 import reward_pb2, reward_pb2_grpc
from evoskill.stack.supervisor import free_port
from tests.integration.waiting import until

pytestmark = pytest.mark.integration


class SlowOrPickyReward(reward_pb2_grpc.RewardServiceServicer):
    def __init__(self) -> None:
        self.calls = 0

    @rpc_method
    async def Score(
        self, request: reward_pb2.ScoreRequest, context: grpc.aio.ServicerContext
    ) -> reward_pb2.RewardBreakdown:
        self.calls += 1
        if request.transition.action.text == "sleep":
            await asyncio.sleep(2.0)
        if not request.transition.episode_id:
            raise InvalidInput("transition.episode_id is empty")
        if request.transition.action.text == "lookup":
            raise NotFound(f"no episode {request.transition.episode_id!r}")
        if request.transition.action.text == "crash":
            return reward_pb2.RewardBreakdown(total=float(int("one")))  # a bug: a built-in ValueError
        if request.transition.action.text == "crash-key":
            return reward_pb2.RewardBreakdown(terms={"x": {}["missing"]})  # a bug: a built-in KeyError
        return reward_pb2.RewardBreakdown(total=1.0)


@pytest.fixture
async def reward_server():  # type: ignore[no-untyped-def]
    servicer = SlowOrPickyReward()
    server = await start_server(
        [(reward_pb2_grpc.add_RewardServiceServicer_to_server, servicer, "evoskill.reward.v1.RewardService")],
        "127.0.0.1:0",
    )
    yield servicer, f"127.0.0.1:{server.port}"
    await server.stop()


def transition(action: str, episode: str = "e1") -> reward_pb2.ScoreRequest:
    return reward_pb2.ScoreRequest(
        transition=common_pb2.Transition(episode_id=episode, action=common_pb2.Action(text=action))
    )


async def test_call_past_its_deadline_fails_with_deadline_exceeded(reward_server) -> None:  # type: ignore[no-untyped-def]
    _, target = reward_server
    async with channel(target, GrpcSettings(deadline_s=0.3)) as ch:
        stub = reward_pb2_grpc.RewardServiceStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Score(transition("sleep"))  # no per-call timeout: the default deadline applies
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_a_call_naming_its_own_deadline_keeps_it(reward_server) -> None:  # type: ignore[no-untyped-def]
    servicer, target = reward_server
    async with channel(target, GrpcSettings(deadline_s=0.3)) as ch:
        reply = await reward_pb2_grpc.RewardServiceStub(ch).Score(transition("sleep"), timeout=30)
    assert reply.total == 1.0 and servicer.calls == 1


async def test_a_blocking_call_past_its_deadline_fails_with_deadline_exceeded(reward_server) -> None:  # type: ignore[no-untyped-def]
    """The search's worker thread calls through a blocking channel: the default deadline applies there too."""
    _, target = reward_server

    def call() -> grpc.StatusCode:
        with sync_channel(target, GrpcSettings(deadline_s=0.3)) as ch:
            try:
                reward_pb2_grpc.RewardServiceStub(ch).Score(transition("sleep"))
            except grpc.RpcError as error:
                return error.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK

    assert await asyncio.to_thread(call) == grpc.StatusCode.DEADLINE_EXCEEDED


@pytest.mark.parametrize(("action", "episode", "code", "named"), [
    ("look", "", grpc.StatusCode.INVALID_ARGUMENT, "InvalidInput: transition.episode_id is empty"),
    ("lookup", "e7", grpc.StatusCode.NOT_FOUND, "NotFound: no episode 'e7'"),
])
async def test_a_domain_error_answers_its_status_naming_the_problem(reward_server, action: str, episode: str,  # type: ignore[no-untyped-def]
                                                                    code: grpc.StatusCode, named: str) -> None:
    _, target = reward_server
    async with channel(target) as ch:
        stub = reward_pb2_grpc.RewardServiceStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Score(transition(action, episode=episode))
    assert info.value.code() == code
    assert info.value.details() == named


@pytest.mark.parametrize(("action", "kind"), [("crash", "ValueError"), ("crash-key", "KeyError")])
async def test_a_builtin_error_is_a_bug_answered_internal_and_logged(reward_server, caplog, action: str,  # type: ignore[no-untyped-def]
                                                                     kind: str) -> None:
    _, target = reward_server
    async with channel(target) as ch:
        stub = reward_pb2_grpc.RewardServiceStub(ch)
        with caplog.at_level(logging.ERROR, logger="evoskill.platform.rpc"), \
                pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Score(transition(action))
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert (info.value.details() or "").startswith(f"internal error: {kind}")
    (record,) = [r for r in caplog.records if r.name == "evoskill.platform.rpc"]
    assert "SlowOrPickyReward.Score failed" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0].__name__ == kind  # the stack trace is in the log


async def test_health_reports_serving_for_registered_services(reward_server) -> None:  # type: ignore[no-untyped-def]
    _, target = reward_server
    assert await check_health(target)
    assert await check_health(target, "evoskill.reward.v1.RewardService")
    assert not await check_health(target, "evoskill.nothing.v1.Nope")


def test_only_safe_methods_are_retried() -> None:
    import json

    config = json.loads(service_config(GrpcSettings(deadline_s=3, retries=4)))
    retried = {
        (name["service"], name["method"])
        for entry in config["methodConfig"] if "retryPolicy" in entry for name in entry["name"]
    }
    assert ("evoskill.reward.v1.RewardService", "Score") in retried
    assert ("evoskill.sandbox.v1.SandboxService", "Step") not in retried
    assert not any("timeout" in entry for entry in config["methodConfig"])  # each call carries its own


def test_a_call_naming_no_deadline_gets_its_methods() -> None:
    settings = GrpcSettings(deadline_s=3)
    assert call_deadline("/evoskill.reward.v1.RewardService/Score", settings) == 3.0
    assert call_deadline(b"/evoskill.planner.v1.PlannerService/PlayEpisode", settings) == 3600.0
    assert call_deadline("/evoskill.sandbox.v1.SandboxService/Step", settings) == 300.0  # may replay the episode
    assert call_deadline("/evoskill.sandbox.v1.SandboxService/Simulate", settings) == 3.0


def test_only_new_work_waits_for_a_restarting_server() -> None:
    import json

    config = json.loads(service_config(GrpcSettings()))
    waiting = {(n.get("service"), n.get("method")) for e in config["methodConfig"] if e.get("waitForReady")
               for n in e["name"]}
    assert waiting == {("evoskill.sandbox.v1.SandboxService", "CreateSession"),
                       ("evoskill.reward.v1.RewardService", "Score")}


# A server whose event loop SIGUSR1 blocks, as a service stuck in a blocking call on its loop would be.
WEDGEABLE_SERVER = """
import asyncio, signal, sys, time
from evoskill.platform.rpc import start_server

async def main():
    server = await start_server([], "127.0.0.1:" + sys.argv[1])
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, time.sleep, 3600)
    await server.wait()

asyncio.run(main())
"""


async def test_a_wedged_event_loop_fails_the_health_check_that_liveness_probes_use() -> None:
    """The chart's liveness probe is the native gRPC check of service "": it is answered on the service's
    event loop (the asyncio health servicer), not by gRPC's own threads, so a wedged loop fails it."""
    port = free_port()
    server = await asyncio.create_subprocess_exec(sys.executable, "-c", WEDGEABLE_SERVER, str(port))
    target = f"127.0.0.1:{port}"
    try:
        await until(lambda: check_health(target), "the server serving")
        server.send_signal(signal.SIGUSR1)
        await until(lambda: _not(check_health(target, timeout_s=1.0)), "the health check failing")
        assert server.returncode is None  # the process is alive: only its loop is stuck
    finally:
        server.kill()
        await server.wait()


async def _not(check: Awaitable[bool]) -> bool:
    return not await check


@pytest.mark.parametrize("reflection", [False, True])
async def test_reflection_is_served_only_when_switched_on(reflection: bool) -> None:
    """Off by default (it lists and describes every method to anyone who connects): a development aid."""
    registration = (reward_pb2_grpc.add_RewardServiceServicer_to_server, SlowOrPickyReward(),
                    "evoskill.reward.v1.RewardService")
    server = await start_server([registration], "127.0.0.1:0", GrpcSettings(reflection=True) if reflection else None)
    try:
        async with channel(f"127.0.0.1:{server.port}") as ch:
            replies = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
            if not reflection:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await replies.read()
                assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
                return
            reply = await replies.read()
        assert "evoskill.reward.v1.RewardService" in {s.name for s in reply.list_services_response.service}
    finally:
        await server.stop()
