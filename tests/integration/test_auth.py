"""Authentication and TLS on the embedded stack: its nats-server admits only its users, each service's user may
publish and subscribe only its own subjects, no secret reaches the disk, and with certificates in the settings NATS
and gRPC speak (mutual) TLS and refuse plaintext."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import nats
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nats.errors import Error as NatsError
from pydantic import SecretStr

from evoskill.common.v1 import common_pb2
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import connect_options
from evoskill.platform.config import QdrantSettings, TlsSettings
from evoskill.platform.rpc import channel, check_health, sync_channel
from evoskill.reward.v1 import reward_pb2, reward_pb2_grpc
from evoskill.stack.supervisor import Stack, nats_ready
from tests.certificates import make_certificates
from tests.conftest import make_settings
from tests.integration.waiting import until

pytestmark = pytest.mark.integration

QDRANT_KEY = "qdrant-key-that-must-stay-off-disk"


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """The embedded stack as `evoskill up` starts it (auth on by default), with the reward service alone."""
    settings = make_settings(tmp_path_factory.mktemp("auth") / "state",
                             qdrant=QdrantSettings(api_key=SecretStr(QDRANT_KEY)))
    stack = Stack(settings, services=("reward",))
    await stack.start()
    yield stack
    stack.stop()


async def connect(stack: Stack, user: str, errors: list[Exception] | None = None) -> nats.NATS:
    async def record(exc: Exception) -> None:
        (errors if errors is not None else []).append(exc)

    return await nats.connect(stack.settings.nats_url, allow_reconnect=False, max_reconnect_attempts=0,
                              error_cb=record, **connect_options(stack.nats_settings(user)))


async def messages_on(stack: Stack, name: str) -> int:
    nc = await connect(stack, "supervisor")  # the stack's own user may read the stream's state
    try:
        subject = stack.settings.subject(name)
        info = await nc.jetstream().stream_info(stack.settings.nats.stream, subjects_filter=subject)
        return sum((info.state.subjects or {}).values())
    finally:
        await nc.close()


async def test_an_unauthenticated_publisher_is_refused(stack: Stack) -> None:
    url, subject = stack.settings.nats_url, stack.settings.subject("policy.published")
    with pytest.raises(NatsError, match="Authorization Violation"):
        await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2)
    with pytest.raises(NatsError, match="Authorization Violation"):  # a user with a guessed password
        await nats.connect(url, user="learner", password="learner", allow_reconnect=False, max_reconnect_attempts=0)

    # The protocol spoken by hand, no client library: CONNECT without credentials, then PUB and SUB.
    host, _, port = url.removeprefix("nats://").rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    assert (await reader.readline()).startswith(b"INFO ")
    writer.write(f'CONNECT {{"verbose":false}}\r\nPUB {subject} 2\r\nv9\r\nSUB {subject} 1\r\nPING\r\n'.encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)  # the server closes the connection
    writer.close()
    assert b"-ERR 'Authorization Violation'" in answer and b"PONG" not in answer
    assert await messages_on(stack, "policy.published") == 0


async def test_a_service_user_may_use_only_its_own_subjects(stack: Stack) -> None:
    errors: list[Exception] = []
    reward = await connect(stack, "reward", errors)
    try:
        js = reward.jetstream()
        await js.publish(stack.settings.subject("reward.scored"), b"", timeout=5)  # its own subject
        with pytest.raises(nats.errors.TimeoutError):  # another's: the server drops it, no ack comes
            await js.publish(stack.settings.subject("policy.published"), b"", timeout=1)
        await reward.subscribe(stack.settings.subject("policy.published"))  # nor may it listen to another's
        await reward.flush()
        await until(lambda: len(errors) >= 2, "the server's refusals")
    finally:
        await reward.close()
    refused = " ".join(str(e) for e in errors)
    assert 'permissions violation for publish to "evoskill.policy.published"' in refused
    assert 'permissions violation for subscription to "evoskill.policy.published"' in refused
    assert await messages_on(stack, "policy.published") == 0

    # The reward service, with its own user, consumes a step the sandbox's user publishes and scores it; one
    # with a NaN reward, from the same authenticated publisher, it dead-letters and never scores.
    before = await messages_on(stack, "reward.scored")
    sandbox = await connect(stack, "sandbox")
    try:
        for episode_id, env_reward in (("auth-nan", math.nan), ("auth-e1", 0.0)):
            step = events_pb2.StepExecuted(transition=common_pb2.Transition(
                episode_id=episode_id, action=common_pb2.Action(text="take coin"), env_reward=env_reward))
            await sandbox.jetstream().publish(stack.settings.subject("step.executed"), step.SerializeToString())
    finally:
        await sandbox.close()
    await until(lambda: _more(stack, "reward.scored", before), "reward.scored published by the reward service")
    await until(lambda: _more(stack, "dlq.step.executed", 0), "the NaN step dead-lettered by the reward service")
    assert await messages_on(stack, "reward.scored") == before + 1  # the good step alone


async def test_no_secret_is_written_to_disk(stack: Stack) -> None:
    state = stack.state_dir
    for name in ("settings.json", "nats.conf"):
        assert (state / name).stat().st_mode & 0o777 == 0o600, name
    nats_settings = stack.nats_settings("reward")
    password = nats_settings.password.get_secret_value()
    assert nats_settings.user == "reward" and password
    secrets = [QDRANT_KEY.encode(), password.encode(), stack.nats_settings().password.get_secret_value().encode()]
    for path in (p for p in state.rglob("*") if p.is_file()):  # settings, server config, logs, JetStream store
        data = path.read_bytes()
        assert not any(secret in data for secret in secrets), f"a secret in {path}"
    # Yet the service got them: it runs with its user, and would reach a Qdrant server with the key.
    assert await check_health(f"127.0.0.1:{stack.settings.reward_endpoint.port}")


async def test_tls_on_nats_and_grpc_refuses_plaintext(tmp_path: Path) -> None:
    made = make_certificates(tmp_path / "certs")
    tls = TlsSettings(cert=made.cert, key=made.key, ca=made.ca, client_auth=True)
    base = make_settings(tmp_path / "state")
    settings = base.model_copy(update={"nats": base.nats.model_copy(update={"tls": tls}),
                                       "grpc": base.grpc.model_copy(update={"tls": tls})})
    stack = Stack(settings, services=("reward",))
    await stack.start()  # the supervisor's probes and the reward service's bus and server, all over TLS
    try:
        target = f"127.0.0.1:{settings.reward_endpoint.port}"
        request = reward_pb2.ScoreRequest(transition=common_pb2.Transition(
            episode_id="tls-e1", action=common_pb2.Action(text="take coin")))
        async with channel(target, settings.grpc) as ch:
            assert (await reward_pb2_grpc.RewardServiceStub(ch).Score(request, timeout=10)).total != 0
        async with channel(target) as ch:  # plaintext to the TLS server (Score would wait for a connection)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        with sync_channel(target, settings.grpc) as blocking:  # what the planner's search dials the sandbox with
            check = health_pb2_grpc.HealthStub(blocking).Check
            reply = await asyncio.to_thread(check, health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        no_client_cert = settings.grpc.model_copy(update={"tls": TlsSettings(ca=made.ca)})
        assert not await check_health(target, settings=no_client_cert)  # mutual: a client needs its certificate

        reward = connect_options(stack.nats_settings("reward"))
        assert await nats_ready(settings.nats_url, options=reward)
        plaintext = {k: v for k, v in reward.items() if not k.startswith("tls")}
        assert not await nats_ready(settings.nats_url, options=plaintext)
    finally:
        stack.stop()


async def _more(stack: Stack, name: str, before: int) -> bool:
    return await messages_on(stack, name) > before
