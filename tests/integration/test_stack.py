"""The embedded stack: comes up healthy, refuses a second start, goes down leaving nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from evoskill.platform.config import Settings
from evoskill.platform.trace_file import requests
from evoskill.stack.supervisor import Stack, StackError, component_health, read_state
from tests.conftest import make_settings

pytestmark = pytest.mark.integration


def sessions_alive(session_ids: set[int]) -> list[int]:
    """Live (non-zombie) processes whose session is one of the stack's process groups."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session in session_ids and state != "Z":
            alive.append(int(entry.name))
    return alive


def cli(settings_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings_env}
    return subprocess.run([sys.executable, "-m", "evoskill", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def env_of(settings: Settings) -> dict[str, str]:
    s = settings
    env = {"EVOSKILL_STATE_DIR": str(s.state_dir), "EVOSKILL_NATS__PORT": str(s.nats.port),
           "EVOSKILL_TEMPORAL__PORT": str(s.temporal.port), "EVOSKILL_TEMPORAL__UI_PORT": str(s.temporal.ui_port)}
    for name in ("sandbox", "reward", "memory", "planner", "learner", "orchestrator"):
        env[f"EVOSKILL_{name.upper()}_ENDPOINT__PORT"] = str(s.endpoint(name).port)
    return env


async def test_stack_comes_up_healthy_refuses_a_second_start_and_leaves_nothing(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    stack = Stack(settings)
    await stack.start()
    try:
        sessions = {c.process.pid for c in stack.components if c.process is not None}
        assert len(sessions) == 8  # nats, temporal, six services
        health = await component_health(settings)
        assert all(ok for _, _, ok in health), health
        assert read_state(settings) is not None
        # Qdrant runs in local mode inside the memory service, on disk under the state folder.
        assert (settings.state_dir / "qdrant" / "collection" / settings.qdrant.collection).is_dir()

        # A second stack on the same state folder: one clear line, no traceback.
        result = cli(env_of(settings), "up")
        assert result.returncode == 1
        assert "already in use" in result.stderr and "Traceback" not in result.stderr + result.stdout
        assert "error: error:" not in result.stderr

        with pytest.raises(StackError, match="already in use"):
            await Stack(settings).start()
    finally:
        stack.stop()
    assert sessions_alive(sessions) == []
    assert read_state(settings) is None
    assert not (settings.state_dir / "stack.lock").exists()


async def test_a_taken_port_is_refused_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        settings = make_settings(tmp_path / "state")
        settings = settings.model_copy(update={"nats": settings.nats.model_copy(update={"port": taken})})
        with pytest.raises(StackError, match=f"port {taken} .* already taken"):
            await Stack(settings).start()
        result = cli(env_of(settings), "up")
    assert result.returncode == 1
    assert f"port {taken}" in result.stderr and "Traceback" not in result.stderr
    assert "(nats.port, EVOSKILL_NATS__PORT)" in result.stderr and "set another" in result.stderr  # which setting
    assert not (settings.state_dir / "stack.lock").exists()  # a refused `up` leaves no lock behind


async def test_two_components_on_one_port_are_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    port = settings.reward_endpoint.port
    settings = settings.model_copy(update={"orchestrator_endpoint": settings.reward_endpoint})
    with pytest.raises(StackError, match=rf"port {port} is set for both reward \(reward_endpoint.port, "
                       r"EVOSKILL_REWARD_ENDPOINT__PORT\) and orchestrator \(orchestrator_endpoint.port, "
                       r"EVOSKILL_ORCHESTRATOR_ENDPOINT__PORT\)"):
        await Stack(settings).start()


def test_up_detached_with_replicas_status_and_down_through_the_cli(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    env = env_of(settings) | {"EVOSKILL_TELEMETRY__TRACE_DIR": "traces"}
    started = cli(env, "up", "--detach", "--replicas", "sandbox=2,planner=2")
    assert started.returncode == 0, started.stderr
    # The Temporal UI is served by default, at the address `up` prints.
    assert settings.temporal_ui_url in started.stdout
    assert httpx.get(settings.temporal_ui_url, timeout=30).status_code == 200
    state = read_state(settings)
    assert state is not None
    sessions = {c["pid"] for c in state["components"]} | {state["supervisor_pid"]}
    try:
        # Each replica is its own process on its own port, the first on the configured one.
        for name in ("sandbox", "planner"):
            first = f"127.0.0.1:{settings.endpoint(name).port}"
            listed = state["replicas"][name]
            assert len(set(listed)) == 2 and listed[0] == first
            assert [c["address"] for c in state["components"] if c["name"].startswith(f"{name}-")] == listed
        status = cli(env, "status")  # reads the replicas from the running stack
        assert status.returncode == 0, status.stdout
        assert status.stdout.count("SERVING") == 10  # nats, temporal, six services, a second sandbox and planner
    finally:
        stopped = cli(env, "down")
    assert stopped.returncode == 0, stopped.stderr
    assert sessions_alive(sessions) == []
    assert cli(env, "status").returncode == 1
    # With telemetry.trace_dir each process wrote its spans to its own file (flushed as it stopped): here the
    # health checks `status` made, served by every replica.
    files = {path.name.rsplit("-", 1)[0] for path in (settings.state_dir / "traces").glob("*.jsonl")}
    assert {"sandbox", "planner", "learner"} <= files
    served = {span["name"] for request in requests(settings.state_dir / "traces")
              for resource in request["resourceSpans"] for scope in resource["scopeSpans"] for span in scope["spans"]}
    assert "/grpc.health.v1.Health/Check" in served
