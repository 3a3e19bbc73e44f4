"""A hostile tool task in the sandbox, over gRPC: an endless loop, a 10 GB allocation, a fork bomb, writes outside
its folder, a connection to a socket of the host, and an MCP server whose memory grows without an address-space
cap. Each is stopped or refused and reported (an observation, or the call's error), and the sandbox serves the
next call. What the host's kernel does not allow (a namespace, a bound on processes) the worker reports as a
fallback, and the case checks that report instead; the fork bomb never runs where nothing bounds it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from evoskill.common.v1.common_pb2 import FailureKind
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import RunningService, start_service
from evoskill.sandbox.confine import Confinement
from evoskill.sandbox.service import create
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from tests.conftest import make_settings
from tests.integration.test_bus import isolated
from tests.integration.test_tools_env import processes_mentioning
from tests.integration.waiting import until

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SLEEPER = "hostile-sleeper"  # what the fork bomb's children call themselves
MAX_PROCESSES = 48  # low: the fork bomb is refused long before it can hurt the machine

HOSTILE = f'''
import os, socket

def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b

def spin() -> str:
    """An endless CPU loop."""
    while True:
        pass

def hog(gib: int) -> int:
    """Allocates that many GiB."""
    return len(bytearray(gib << 30))

def fork_bomb() -> int:
    """Forks until refused; each child waits to be killed. Stops by itself at 512 (nothing refused it)."""
    for born in range(512):
        if os.fork() == 0:
            os.execv("/bin/sleep", ["{SLEEPER}", "600"])
    return born + 1

def write(path: str) -> str:
    """Writes a file at that path."""
    with open(path, "w") as f:
        f.write("evil")
    return "written"

def scratch() -> str:
    """Writes a file in its own folder."""
    with open(os.path.join(os.environ["TMPDIR"], "scratch.txt"), "w") as f:
        f.write("fine")
    return "written"

def connect(port: int) -> str:
    """Connects to that port on localhost."""
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        return "connected"
'''

GROWER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("grower")

@server.tool()
def grow() -> str:
    """Allocates memory until it is stopped."""
    chunks = []
    while True:
        chunks.append(b"x" * (128 << 20))
    return "never"

server.run()
'''


@pytest.fixture
def task_folder() -> Iterator[Path]:
    """Readable by every user (not under pytest's private folders): a root sandbox's workers may be nobody."""
    folder = Path(tempfile.mkdtemp(prefix="evoskill-hostile-"))
    folder.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket of the host the tool tries to reach."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        s.settimeout(0)
        yield s


@pytest.fixture
async def sandbox(tmp_path: Path, nats_url: str) -> AsyncIterator[tuple[Any, Any]]:
    base = make_settings(tmp_path)
    settings: Settings = isolated(base.model_copy(update={
        "nats": base.nats.model_copy(update={"url": nats_url}),
        "sandbox": base.sandbox.model_copy(update={
            "step_timeout_s": 20.0, "memory_mb": 512, "max_processes": MAX_PROCESSES, "run_as": "nobody"}),
    }))
    running: RunningService = await start_service("sandbox", settings, create)
    async with channel(settings.endpoint("sandbox").target) as ch:
        yield running.parts.registrations[0][1], sandbox_pb2_grpc.SandboxServiceStub(ch)
    await running.stop()


async def test_a_hostile_tool_is_stopped_or_refused_and_the_sandbox_serves_the_next_call(
        sandbox: tuple[Any, Any], task_folder: Path, listener: socket.socket) -> None:
    servicer, stub = sandbox
    outside = [REPO / f"evil-{uuid.uuid4().hex[:8]}", Path(tempfile.gettempdir()) / f"evil-{uuid.uuid4().hex[:8]}"]
    (task_folder / "hostile.py").write_text(HOSTILE)
    (task_folder / "grower.py").write_text(GROWER)
    hostile = {"id": "hostile", "goal": "What is 2 + 3?", "expected_answer": 5, "timeout_s": 3,
               "tools": ["hostile:add", "hostile:spin", "hostile:hog", "hostile:fork_bomb", "hostile:write",
                         "hostile:scratch", "hostile:connect"],
               "arguments": {"a": [2], "b": [3], "gib": [10], "path": [str(p) for p in outside],
                             "port": [listener.getsockname()[1]]}}
    # No address-space cap on this server (as for a Node server): the worker's memory watch is what stops it.
    grower = {"id": "grower", "goal": "Grow.", "expected_answer": 5, "timeout_s": 60, "tools": [
        "hostile:add", {"command": "python grower.py", "memory_mb": 0}], "arguments": {"a": [2], "b": [3]}}
    (task_folder / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in (hostile, grower)))
    spec = f"tools:{task_folder / 'tasks.jsonl'}"

    async def session(task: str) -> tuple[str, Confinement]:
        reply = await stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec=f"{spec}?task={task}", seed=0),
                                         timeout=120)
        confinement = servicer.sessions[reply.session_id].worker.confinement
        assert confinement is not None
        return reply.session_id, confinement

    async def step(action: str) -> tuple[str, int]:
        reply = await stub.Step(sandbox_pb2.StepRequest(session_id=sid, action=action), timeout=60)
        return reply.transition.after.text, reply.transition.failure.kind

    async def serves_the_next_call() -> None:
        assert await step("add(a=2, b=3)") == ("add(a=2, b=3) returned: 5", FailureKind.FAILURE_KIND_NONE)

    sid, confinement = await session("hostile")
    fell_back = "; ".join(confinement.notes)
    assert confinement.user != "root" or os.geteuid() != 0 or "stays root" in fell_back

    text, kind = await step("spin()")  # stopped by the call's timeout, its process (group) killed
    assert kind == FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT and "failed (timeout): no answer within 3 s" in text
    await serves_the_next_call()

    text, kind = await step("hog(gib=10)")  # refused by the tool process's address-space cap
    assert text.startswith("hog(gib=10) failed (error): MemoryError") and kind == FailureKind.FAILURE_KIND_NO_EFFECT
    await serves_the_next_call()

    if confinement.processes:  # never unbounded: a bound the worker reports is what refuses the fork
        text, _ = await step("fork_bomb()")
        assert text.startswith("fork_bomb() failed (error): BlockingIOError: [Errno 11]"), text
        await until(lambda: not processes_mentioning(SLEEPER), "the fork bomb's children to go with its process",
                    within_s=10)
        await serves_the_next_call()
    else:
        assert "processes are not bounded" in fell_back

    for path in outside:
        text, _ = await step(f"write(path={str(path)!r})")
        if confinement.private_files:
            assert "failed (error): " in text and ("Read-only file system" in text or "Permission denied" in text)
            assert not path.exists()
        else:
            path.unlink(missing_ok=True)
            assert "files are not read-only" in fell_back or "shares the host's network and files" in fell_back
    assert await step("scratch()") == ("scratch() returned: written", FailureKind.FAILURE_KIND_NONE)

    port = listener.getsockname()[1]
    text, _ = await step(f"connect(port={port})")
    if confinement.network_isolated:  # its own loopback, where nothing listens
        assert text.startswith(f"connect(port={port}) failed (error): ConnectionRefusedError"), text
        with pytest.raises(BlockingIOError):
            listener.accept()
    else:
        assert "shares the host's network" in fell_back
    await serves_the_next_call()

    sid, _ = await session("grower")  # its call may take 8 s (0.4 of the step timeout): memory stops it first
    worker = servicer.sessions[sid].worker
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await step("grow()")
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "exceeded its memory cap of 512 MiB" in (info.value.details() or "")
    assert not await asyncio.to_thread(os.path.exists, worker.folder)  # its folder went with it

    sid, _ = await session("hostile")  # a fresh worker
    await serves_the_next_call()
    text, _ = await step("final_answer(answer=5)")
    assert "accepted" in text
