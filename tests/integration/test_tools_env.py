"""ToolEnv with real tool processes: Python tools in their host, MCP servers over stdio and streamable HTTP. A
tool that hangs or crashes is stopped and reported, and the episode goes on."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoskill.common.v1.common_pb2 import FailureKind
from evoskill.envs import InvalidActionError, make_env
from tests.integration.tools_fixtures import BOOKSHOP, EXAMPLE, FAULTY_SERVER, SCIFI_GOLD, write_tasks

pytestmark = pytest.mark.integration


def processes_mentioning(marker: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        try:
            mentions = entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().decode(errors="replace")
            if mentions and (entry / "stat").read_text().split(") ", 1)[1][0] != "Z":
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def test_hanging_and_crashing_tools_are_stopped_reported_and_the_episode_goes_on(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, {
        "id": "faults", "goal": "What is 2 + 3?", "state": {},
        "tools": [FAULTY_SERVER, "pytools:add", "pytools:tick", "pytools:stall_py", "pytools:die_py"],
        "arguments": {"a": [2], "b": [3], "text": ["hi"], "seconds": [600], "code": [3]},
        "expected_answer": 5, "timeout_s": 3,
    })
    env = make_env(f"tools:{path}")
    try:
        obs = env.reset(0, "train")
        assert {"echo(text='hi')", "stall()", "die()", "add(a=2, b=3)", "tick()", "stall_py(seconds=600)",
                "die_py(code=3)", "ask_clarification()"} <= set(obs.valid_actions)
        assert "- echo(text: string): Says the text back." in obs.goal
        assert env.template("add(a=2, b=3)") == "add(a, b)"
        start = env.snapshot()

        def step(action: str) -> tuple[str, int]:
            o, _ = env.step(action)
            failure = env.last_failure()  # type: ignore[attr-defined]
            return o.text, failure.kind if failure is not None else FailureKind.FAILURE_KIND_NONE

        text, kind = step("stall()")
        assert kind == FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT
        assert text.startswith("stall() failed (timeout): no answer within 3 s; the server was stopped")
        text, kind = step("stall()")  # search would try it again and again: answered from memory
        assert kind == FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT and "not called again for 60 s" in text
        assert step("echo(text='hi')") == ("echo(text='hi') returned: hi", FailureKind.FAILURE_KIND_NONE)
        text, kind = step("die()")
        assert kind == FailureKind.FAILURE_KIND_EXTERNAL_ERROR and "exited with code 7 during the call" in text
        # Not listed, but a call of a tool that fits its schema is played (an LLM's proposal).
        assert step("echo(text='not listed')")[0] == "echo(text='not listed') returned: not listed"
        with pytest.raises(InvalidActionError, match="invalid arguments for echo\\(text: string\\)"):
            env.step("echo(text=1)")

        text, kind = step("stall_py(seconds=600)")
        assert kind == FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT and "the tool's process was stopped" in text
        text, kind = step("die_py(code=3)")
        assert kind == FailureKind.FAILURE_KIND_EXTERNAL_ERROR
        assert "the tool's process exited with code 3: dying now" in text  # what it printed last, from stderr
        assert step("tick()") == ("tick() returned: 1", FailureKind.FAILURE_KIND_NONE)
        assert env.observation().inventory == '{"ticks": 1}'
        assert step("add(a=2, b=3)")[0] == "add(a=2, b=3) returned: 5"
        assert "final_answer(answer=5)" in env.valid_actions()

        # Back to the start: the env's own state, no tool called again (tick logged one call).
        assert env.restore(start).inventory == "{}"
        assert step("tick()")[0] == "tick() returned: 1"
        assert (tmp_path / "calls.log").read_text().count("tick") == 2
        obs, reward = env.step("final_answer(answer=5)")
        assert obs.done and obs.won and obs.score == 1.0 and reward == 1.0
    finally:
        env.close()
    for _ in range(50):  # every tool process went with the env
        if not processes_mentioning(str(tmp_path)):
            break
        time.sleep(0.1)
    assert processes_mentioning(str(tmp_path)) == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bookshop_over_http() -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen([sys.executable, str(EXAMPLE / "bookshop_server.py"), "--http", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None, "the bookshop server exited"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()


def test_an_mcp_server_over_streamable_http_and_a_task_file_that_names_no_tools(tmp_path: Path,
                                                                               bookshop_over_http: str) -> None:
    path = write_tasks(tmp_path, {"id": "scifi", "goal": "The cheapest science-fiction book?",
                                  "expected_answer": "Foundation", "gold": [*SCIFI_GOLD, "final_answer('Foundation')"]})
    with make_env(f"tools:{path}?servers={bookshop_over_http}") as env:
        obs = env.reset(0, "test")
        assert "search_books(genre='science fiction')" in obs.valid_actions
        gold = env.gold_path()
        assert gold is not None and gold[-1] == "final_answer(answer='Foundation')"  # canonical text
        for action in gold:
            obs, _ = env.step(action)
        assert obs.won and obs.score == 1.0
        assert env.template(gold[1]) == "get_price(isbn)"


def test_a_tool_that_does_not_start_fails_the_reset_naming_it(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, {"goal": "g", "check": "pytools:add", "tools": [BOOKSHOP, "pytools:nope"]})
    with make_env(f"tools:{path}") as env, pytest.raises(Exception, match="Python tool 'pytools:nope': "
                                                                         "AttributeError: module 'pytools' has no"):
        env.reset(0, "train")
    path = write_tasks(tmp_path, {"goal": "g", "check": "pytools:add", "tools": [{"command": "python -c 'exit(4)'"}]})
    with make_env(f"tools:{path}") as env, pytest.raises(Exception, match="could not start: exited with code 4"):
        env.reset(0, "train")


async def test_a_worker_the_sandbox_kills_mid_call_takes_its_tool_processes_along(tmp_path: Path) -> None:
    """A tool stuck in a call never reads that its pipe closed: it dies with the worker (launch.py's tie)."""
    from evoskill.sandbox.worker import Worker

    server = {"command": sys.executable, "args": [str(tmp_path / "faulty_server.py")]}  # its path names it
    path = write_tasks(tmp_path, {"goal": "g", "expected_answer": 1, "tools": [server, "pytools:stall_py"]})
    worker = Worker(memory_mb=0, step_timeout_s=10.0)
    try:
        await worker.call(120.0, "open", f"tools:{path}", 0, "train", "e1", (0.0, 0.0), False, False, None)
        assert len(processes_mentioning(str(tmp_path))) == 2  # the MCP server and the Python tool host
        # The sandbox's step timeout, here 1 s, kills the worker; the call says it timed out, not that it crashed.
        with pytest.raises(TimeoutError, match=r"took longer than 1\.0s"):
            await worker.call(1.0, "step", "stall_py(seconds=600)")
    finally:
        worker.kill()
    for _ in range(50):
        if not processes_mentioning(str(tmp_path)):
            break
        await asyncio.sleep(0.1)
    assert processes_mentioning(str(tmp_path)) == []
