"""The sandbox service over real gRPC with real environment workers and a real nats-server."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from evoskill.core.reward import EpisodeHistory
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import RunningService, start_service
from evoskill.sandbox.service import create
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from tests.integration.test_bus import isolated
from tests.integration.waiting import until

pytestmark = pytest.mark.integration


@pytest.fixture
async def sandbox(settings: Settings):  # type: ignore[no-untyped-def]
    settings = isolated(settings)
    settings = settings.model_copy(update={"sandbox": settings.sandbox.model_copy(update={"step_quota": 500})})
    running: RunningService = await start_service("sandbox", settings, create)
    async with channel(settings.endpoint("sandbox").target) as ch:
        yield settings, running, sandbox_pb2_grpc.SandboxServiceStub(ch)
    await running.stop()


async def test_play_probe_and_publish(sandbox) -> None:  # type: ignore[no-untyped-def]
    settings, _, stub = sandbox
    watcher = Bus(settings, "watcher")
    seen: list[events_pb2.StepExecuted] = []

    @watcher.consumer(Subjects.STEP_EXECUTED, events_pb2.StepExecuted)
    async def on_step(event: events_pb2.StepExecuted) -> None:
        seen.append(event)

    await watcher.start()
    try:
        reply = await stub.CreateSession(
            sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=3, fold="test", gold_path=True), timeout=120
        )
        assert reply.observation.goal and reply.observation.valid_actions and reply.gold_path
        sid = reply.session_id

        probes = [sandbox_pb2.Probe(actions=[a], rollout_depth=5, rollout_seed=i)
                  for i, a in enumerate(reply.observation.valid_actions)]
        sim = await stub.Simulate(sandbox_pb2.SimulateRequest(session_id=sid, probes=probes, gamma=0.9))
        assert [r.transition.action.text for r in sim.results] == list(reply.observation.valid_actions)
        assert all(r.state_key and len(r.templates) == len(r.observation.valid_actions) for r in sim.results)
        assert sim.env_steps > 0
        # A probe's transition has the simulated path in its history (what search scores it with).
        first, then = reply.observation.valid_actions[0], sim.results[0].observation.valid_actions[0]
        deeper = await stub.Simulate(sandbox_pb2.SimulateRequest(session_id=sid, probes=[
            sandbox_pb2.Probe(actions=[first, then])]))
        walked = EpisodeHistory.from_transition(deeper.results[0].transition)
        assert walked.took(first) and walked.saw(sim.results[0].observation.text, "")

        # Simulation never moves the session: following the gold path still wins.
        for action in reply.gold_path:
            step = await stub.Step(sandbox_pb2.StepRequest(session_id=sid, action=action, publish=True))
        assert step.transition.after.won and step.transition.after.done
        # The last step carries the episode before it as the reward's bounded digest, not as text.
        history = EpisodeHistory.from_transition(step.transition)
        assert all(history.took(a) for a in reply.gold_path[:-1])
        assert len(history.actions) == len(set(reply.gold_path[:-1])) and not history.saw("never said", "")
        with pytest.raises(grpc.aio.AioRpcError) as info:  # the env's EnvStateError, across the worker's pipe
            await stub.Step(sandbox_pb2.StepRequest(session_id=sid, action=reply.gold_path[0]))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "episode is over" in (info.value.details() or "")

        for _ in range(50):
            if len({e.transition.step_index for e in seen}) >= len(reply.gold_path):
                break
            await asyncio.sleep(0.1)
        # At least once, in any order (a handler slowed by a loaded machine is redelivered): one per step.
        by_index = {e.transition.step_index: e.transition.action.text for e in seen}
        assert [by_index[i] for i in sorted(by_index)] == list(reply.gold_path)
    finally:
        await watcher.stop()


async def test_bad_input_answers_invalid_argument_naming_the_problem(sandbox) -> None:  # type: ignore[no-untyped-def]
    _, _, stub = sandbox
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:chess", seed=1), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "chess" in (info.value.details() or "")

    reply = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1), timeout=120)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Step(sandbox_pb2.StepRequest(session_id=reply.session_id, action="fly to the moon"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fly to the moon" in (info.value.details() or "")

    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Step(sandbox_pb2.StepRequest(session_id="nope", action="look around"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_killed_worker_fails_its_call_and_the_next_episode_succeeds(sandbox) -> None:  # type: ignore[no-untyped-def]
    _, running, stub = sandbox
    servicer = running.parts.registrations[0][1]
    reply = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=2), timeout=120)
    await servicer.kill_worker(reply.session_id)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Step(sandbox_pb2.StepRequest(session_id=reply.session_id, action=reply.observation.valid_actions[0]))
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "worker died" in (info.value.details() or "")

    again = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=2,
                                                                      gold_path=True), timeout=120)
    for action in again.gold_path:
        step = await stub.Step(sandbox_pb2.StepRequest(session_id=again.session_id, action=action))
    assert step.transition.after.won


async def test_a_simulate_whose_deadline_comes_first_answers_the_probes_it_had_time_for(sandbox) -> None:  # type: ignore[no-untyped-def]
    _, _, stub = sandbox
    reply = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=3,
                                                                      step_quota=10_000_000), timeout=120)
    sid, actions = reply.session_id, list(reply.observation.valid_actions)
    # Far more than 4 s of probes: each walks 50 random steps (or until the game ends) after its action.
    probes = [sandbox_pb2.Probe(actions=[actions[i % len(actions)]], rollout_depth=50, rollout_seed=i)
              for i in range(4096)]
    sim = await stub.Simulate(sandbox_pb2.SimulateRequest(session_id=sid, probes=probes), timeout=4.0)
    assert sim.partial and 0 < len(sim.results) < len(probes) and sim.env_steps > 0
    assert [r.transition.action.text for r in sim.results] == [p.actions[0] for p in probes[:len(sim.results)]]
    # The worker was not killed: the session plays on from its own state.
    step = await stub.Step(sandbox_pb2.StepRequest(session_id=sid, action=actions[0]))
    assert step.transition.before.text == reply.observation.text
    whole = await stub.Simulate(sandbox_pb2.SimulateRequest(session_id=sid, probes=[sandbox_pb2.Probe()]))
    assert not whole.partial and len(whole.results) == 1


async def test_step_quota_is_enforced(sandbox) -> None:  # type: ignore[no-untyped-def]
    _, _, stub = sandbox
    reply = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1, step_quota=3),
                                     timeout=120)
    for _ in range(3):
        await stub.Step(sandbox_pb2.StepRequest(session_id=reply.session_id, action="look around"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Step(sandbox_pb2.StepRequest(session_id=reply.session_id, action="look around"))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_a_session_whose_client_is_gone_is_closed_and_its_worker_stopped(settings: Settings) -> None:
    settings = isolated(settings)
    settings = settings.model_copy(update={"sandbox": settings.sandbox.model_copy(update={"session_idle_s": 2.0})})
    running = await start_service("sandbox", settings, create)
    servicer = running.parts.registrations[0][1]
    try:
        async with channel(settings.endpoint("sandbox").target) as ch:
            stub = sandbox_pb2_grpc.SandboxServiceStub(ch)
            left = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1), timeout=120)
            worker = servicer.sessions[left.session_id].worker
            used = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=2), timeout=120)

            async def gone_while_the_other_is_used() -> bool:
                await stub.Step(sandbox_pb2.StepRequest(session_id=used.session_id, action="look around"))
                return not worker.alive

            await until(gone_while_the_other_is_used, "the idle session's worker stopped")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Step(sandbox_pb2.StepRequest(session_id=left.session_id, action="look around"))
            assert info.value.code() == grpc.StatusCode.NOT_FOUND and "expired" in (info.value.details() or "")
            assert worker not in servicer.idle[False]  # stopped, not pooled
            await stub.Step(sandbox_pb2.StepRequest(session_id=used.session_id, action="look around"))
    finally:
        await running.stop()
