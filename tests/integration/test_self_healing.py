"""The embedded stack heals itself: kill -9 of nats-server, Temporal, the sandbox and reward, then of the planner; the
supervisor reaps each, frees what it left (environment workers), starts it again on its port, records the
restart in stack.json for `evoskill status`, and the next episode is played (NATS with authentication on, as
`evoskill up` runs it: the restarted nats-server admits the services' users again); a command after a planner kill
waits for it instead of saying "no stack is running" (or "state folder in use")."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import nats
import pytest

from evoskill.clients.episodes import services
from evoskill.planner.client import episode_request, play
from evoskill.platform.bus import connect_options
from evoskill.platform.config import Settings
from evoskill.platform.rpc import check_health
from evoskill.stack.running import ServiceDown, process_alive
from evoskill.stack.supervisor import Stack, nats_ready, read_state, temporal_ready
from tests.conftest import make_settings
from tests.integration.test_stack import cli, env_of, sessions_alive
from tests.integration.waiting import until

pytestmark = pytest.mark.integration

EPISODE = {"env": "twx:coin", "fold": "test", "agent": "mcts", "simulations": 4, "max_steps": 4}


def component(settings: Settings, name: str) -> dict[str, Any]:
    state = read_state(settings)
    assert state is not None
    return next(c for c in state["components"] if c["name"] == name)


async def restarted(stack: Stack, name: str, old_pid: int) -> bool:
    c = component(stack.settings, name)
    if c["state"] != "running" or c["pid"] == old_pid or c["restarts"] < 1:
        return False
    if name == "nats-server":  # it admits the stack's users again, with the same passwords
        return await nats_ready(c["address"], options=connect_options(stack.nats_settings()))
    return await (temporal_ready if name == "temporal" else check_health)(c["address"])


async def stream_messages(stack: Stack) -> int:
    nc = await nats.connect(stack.settings.nats_url, connect_timeout=2, max_reconnect_attempts=0,
                            **connect_options(stack.nats_settings()))
    try:
        return int((await nc.jetstream().stream_info(stack.settings.nats.stream)).state.messages)
    finally:
        await nc.close()


async def test_killed_children_are_restarted_and_the_next_episodes_are_played(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    stack = Stack(settings, services=("sandbox", "reward", "planner"))
    await stack.start()
    said: list[str] = []
    try:
        async with services(settings, said.append) as running:
            assert (await play(running, episode_request(seed=0, **EPISODE))).steps > 0
        assert said == []  # the stack was found, not started
        events = await stream_messages(stack)
        assert events > 0
        pids = {name: component(settings, name)["pid"] for name in ("nats-server", "temporal", "sandbox", "reward")}
        workers = sessions_alive({pids["sandbox"]})
        assert len(workers) > 1  # the sandbox and its pooled environment worker

        for pid in pids.values():
            os.kill(pid, signal.SIGKILL)
        for name, pid in pids.items():
            await until(lambda name=name, pid=pid: restarted(stack, name, pid), f"{name} restarted")  # type: ignore[misc]
            assert component(settings, name)["last_exit"] == "signal 9 (SIGKILL)"
            assert not process_alive(pid)  # reaped, not a zombie
        assert sessions_alive({pids["sandbox"]}) == []  # the crashed sandbox's worker went too
        assert await stream_messages(stack) >= events  # same JetStream store: the stream survived

        status = await asyncio.to_thread(cli, env_of(settings), "status")
        rows = {line.split("│")[1].strip(): line for line in status.stdout.splitlines() if line.count("│") > 4}
        for name in ("temporal", "sandbox", "reward"):
            assert "SERVING" in rows[name] and "signal 9 (SIGKILL)" in rows[name], status.stdout

        # The planner's channels reach the restarted sandbox and reward.
        async with services(settings, said.append) as running:
            assert (await play(running, episode_request(seed=1, **EPISODE))).steps > 0

        os.kill(component(settings, "planner")["pid"], signal.SIGKILL)
        async with services(settings, said.append) as running:  # waits while the supervisor restarts it
            assert (await play(running, episode_request(seed=2, **EPISODE))).steps > 0
        assert any(line.startswith("planner ") and "restart" in line for line in said), said
        assert not any("no stack is running" in line for line in said), said
    finally:
        stack.stop()


async def test_a_child_that_keeps_failing_is_given_up_and_commands_say_so(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    settings = settings.model_copy(update={"stack": settings.stack.model_copy(update={
        "restart_first_delay_s": 0.0, "restart_give_up_after": 2})})
    stack = Stack(settings, services=("planner",))
    stack.state_dir.mkdir(parents=True)
    failing = stack._spawn("planner", "service", "127.0.0.1:1", ["sh", "-c", "exit 3"])
    try:
        await until(lambda: stack.check_children(time.monotonic()) or failing.restarts.gave_up, "the give-up")
        assert failing.state == "gave up" and failing.restarts.count == 1 and failing.restarts.last_exit == "code 3"
        recorded = component(settings, "planner")
        assert recorded["state"] == "gave up" and "2 exits in a row" in recorded["gave_up"]
        assert not process_alive(recorded["pid"])  # reaped
        with pytest.raises(ServiceDown, match="planner is down: the stack gave up after 2 exits"):
            async with services(settings, print):
                pass
    finally:
        stack.stop()
