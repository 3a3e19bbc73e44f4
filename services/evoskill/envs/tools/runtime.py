"""Where a task's tools run: a Python tool host and MCP servers, each a process of its own under the limits.

The env (in a sandbox worker) calls them through a :class:`ToolBox`, synchronously; the I/O runs on one event
loop in a thread of the env. Every tool process is started by ``launch.py``: its own process group, tied to
the worker's life, its address space capped. A call that outlasts its timeout stops the tool's process (its
whole group), a process that dies mid-call is reported, and either way the call ends in a :class:`ToolFailure`
the env turns into an observation; the next call starts a fresh process. A Python call that leaves processes
running (a fork) stops the host with them once its answer is in. MCP servers over
streamable HTTP run elsewhere: a timeout drops the connection, and the next call opens another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from evoskill.core.errors import InvalidInput, Unavailable
from evoskill.envs.tools.calls import META_TEMPLATES, ToolInfo
from evoskill.envs.tools.task import HttpServer, PythonTool, StdioServer

HERE = Path(__file__).resolve().parent
LAUNCH, PYHOST = HERE / "launch.py", HERE / "pyhost.py"
MAX_LINE = 16 << 20  # one message of a tool process
STDERR_LINES = 20  # kept to say why a process died
CONNECTION_CLOSED = -32000  # the SDK's error code for a session whose stream ended (mcp_types.CONNECTION_CLOSED)
T = TypeVar("T")
FailureKind = Literal["error", "timeout", "crash"]


class ToolFailure(Exception):
    """A call that gave no result: the tool said error, timed out (its process stopped) or crashed."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ToolLimits:
    """Per call: ``call_timeout_s``; per process start: ``start_timeout_s`` (at reset) and ``restart_timeout_s``
    (inside a step, after a stopped or crashed process); ``memory_mb``: each tool process's address-space cap
    (0: none). The sandbox fits them into its own step timeout and memory cap (``ToolEnv.apply_limits``)."""

    call_timeout_s: float = 5.0
    start_timeout_s: float = 60.0
    restart_timeout_s: float = 30.0
    memory_mb: int = 2048


def interpreter(argv: list[str]) -> list[str]:
    """``python`` is the interpreter evoskill runs in, so servers installed beside it are found."""
    return [sys.executable, *argv[1:]] if argv and argv[0] in ("python", "python3") else argv


class _Loop:
    """An event loop in a daemon thread; ``run`` waits for a coroutine from the env's thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="evoskill-tools", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise ToolFailure("timeout", f"the tool runtime did not answer within {timeout:.1f} s") from None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class _ToolProcess:
    """One tool process: started by launch.py in a session of its own, its stderr's last lines kept."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str] | None, memory_mb: int) -> None:
        self.argv, self.cwd, self.env, self.memory_mb = argv, cwd, env, memory_mb
        self.process: Process | None = None
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.exit_code: int | None = None
        self._drain: asyncio.Task[None] | None = None

    async def spawn(self) -> Process:
        launcher = [sys.executable, "-I", "-S", str(LAUNCH), str(os.getpid()), str(self.memory_mb), "--", *self.argv]
        env = {**os.environ, **self.env} if self.env is not None else None
        self.stderr.clear()
        self.exit_code = None
        self.process = process = await anyio.open_process(launcher, cwd=self.cwd, env=env, start_new_session=True)
        self._drain = asyncio.ensure_future(self._keep_stderr(process))
        return process

    async def _keep_stderr(self, process: Process) -> None:
        assert process.stderr is not None
        buffered = BufferedByteReceiveStream(process.stderr)
        with contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError, anyio.DelimiterNotFound, OSError):
            while True:
                line = (await buffered.receive_until(b"\n", 1 << 16)).decode(errors="replace").strip()
                if line:
                    self.stderr.append(line)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def has_children(self) -> bool:
        """Whether the process has children now (of any of its threads). Read from /proc/<pid>/task/*/children:
        psutil's `children()` scans every process's parent instead, measured 24x slower (6 ms against 0.25 ms
        with 90 processes) on this path, taken after every tool call."""
        if self.process is None:
            return False
        with contextlib.suppress(OSError):
            return any(p.read_text().split() for p in Path(f"/proc/{self.process.pid}/task").glob("*/children"))
        return False

    async def kill(self) -> None:
        """Stop the process's whole group at once, and remember how it ended."""
        process, self.process = self.process, None
        if process is None:
            return
        ours = process.returncode is None
        if ours:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        with anyio.move_on_after(2):
            await process.aclose()
        # Exited before the kill landed (it may not have been reaped yet): that is how it ended, not our kill.
        self.exit_code = None if ours and process.returncode == -signal.SIGKILL else process.returncode
        if self._drain is not None:
            self._drain.cancel()

    async def ended(self) -> str:
        """How the process ended on its own (a crash), with the last thing it wrote to stderr; "" if it did not."""
        if self.process is not None:
            with anyio.move_on_after(1):
                self.exit_code = await self.process.wait()
            await anyio.sleep(0.05)  # its last stderr line
        code = self.exit_code
        if code is None:
            return ""
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return how + (f": {self.stderr[-1]}" if self.stderr else "")


class PythonHost:
    """The Python tools of every task of the env, in one pyhost.py process (stateless: see pyhost)."""

    def __init__(self, folder: Path, limits: ToolLimits) -> None:
        self.proc = _ToolProcess([sys.executable, str(PYHOST), str(folder)], folder, None, limits.memory_mb)
        self.refs: set[str] = set()  # imported again before a fresh host answers, so no call pays for that
        self._out: BufferedByteReceiveStream | None = None
        self._lock = asyncio.Lock()

    async def request(self, message: dict[str, Any], within_s: float, start_within_s: float) -> dict[str, Any]:
        """``message``'s reply within ``within_s`` (a host that is not running first starts, within
        ``start_within_s``); a ToolFailure says why there is none."""
        async with self._lock:
            if not self.proc.alive:
                process = await self.proc.spawn()
                assert process.stdout is not None
                self._out = BufferedByteReceiveStream(process.stdout)
                ready = await self._exchange({"op": "ping", "refs": sorted(self.refs)}, start_within_s, "start")
                if not ready.get("ok"):
                    raise ToolFailure("error", str(ready.get("error", "the Python tool host did not start")))
            reply = await self._exchange(message, within_s, "answer")
            if self.proc.has_children():  # a call leaves nothing running: what it started goes with the host
                await self.proc.kill()
        if "ref" in message and reply.get("ok"):
            self.refs.add(message["ref"])
        if not reply.get("ok"):
            raise ToolFailure("error", str(reply.get("error", "failed")))
        return reply

    async def _exchange(self, message: dict[str, Any], within_s: float, what: str) -> dict[str, Any]:
        process = self.proc.process
        assert process is not None and process.stdin is not None and self._out is not None
        try:
            with anyio.fail_after(within_s):
                await process.stdin.send((json.dumps(message) + "\n").encode())
                line = await self._out.receive_until(b"\n", MAX_LINE)
        except TimeoutError:
            await self.proc.kill()
            raise ToolFailure("timeout", f"no {what} within {within_s:g} s; the tool's process was stopped "
                                         "(a fresh one starts at the next call)") from None
        except anyio.DelimiterNotFound:
            await self.proc.kill()
            raise ToolFailure("error", f"its answer is over {MAX_LINE >> 20} MiB") from None
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError,
                OSError):
            how = await self.proc.ended() or "ended"
            await self.proc.kill()
            raise ToolFailure("crash", f"the tool's process {how} (a fresh one starts at the next call)") from None
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def close(self) -> None:
        await self.proc.kill()


class McpServer:
    """One MCP server: a session held open by its own task (the SDK's contexts live in one task); calls come
    from others. Stdio servers are processes of ours; HTTP servers are reached by URL."""

    def __init__(self, source: StdioServer | HttpServer, folder: Path, limits: ToolLimits) -> None:
        self.source = source
        self.label = source.url if isinstance(source, HttpServer) else " ".join(source.argv)
        self.proc: _ToolProcess | None = None
        if isinstance(source, StdioServer):
            cwd = (folder / source.cwd) if source.cwd else folder
            memory = limits.memory_mb if source.memory_mb is None else source.memory_mb
            self.proc = _ToolProcess(interpreter(source.argv), cwd, source.env, memory)
        self.session: Any = None
        self.wrapped: set[str] = set()  # tools whose structured result is {"result": value} (a list, a str)
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _streams(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.proc is None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            assert isinstance(self.source, HttpServer)
            async with httpx2.AsyncClient(headers=self.source.headers, timeout=httpx2.Timeout(30.0, read=300.0)) as c, \
                    streamable_http_client(self.source.url, http_client=c) as streams:
                yield streams[0], streams[1]
        else:
            async with _stdio_streams(self.proc) as streams:
                yield streams

    async def _hold(self, ready: asyncio.Future[list[Any]]) -> None:
        from mcp import ClientSession

        try:
            async with self._streams() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools, cursor = [], None
                while True:
                    from mcp.types import PaginatedRequestParams

                    page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                    tools += page.tools
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.session = session
                self.wrapped = {t.name for t in tools if _wraps(t.output_schema)}
                ready.set_result(tools)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None

    async def start(self, within_s: float) -> list[Any]:
        """Start (or restart) the server; its tools as the SDK lists them."""
        await self.stop()
        self._stop = asyncio.Event()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(self._hold(ready))
        try:
            return await asyncio.wait_for(asyncio.shield(ready), within_s)
        except TimeoutError:
            await self.stop()
            raise ToolFailure("timeout", f"MCP server {self.label!r} did not start within {within_s:g} s") from None
        except Exception as exc:
            why = (await self.proc.ended() if self.proc is not None else "") or _why(exc)
            await self.stop()
            raise ToolFailure("crash", f"MCP server {self.label!r} could not start: {why}") from None

    async def call(self, name: str, arguments: dict[str, Any], within_s: float, restart_within_s: float) -> Any:
        async with self._lock:
            if self.session is None or (self.proc is not None and not self.proc.alive):
                await self.start(restart_within_s)
            session = self.session
            try:
                with anyio.fail_after(within_s):
                    result = await session.call_tool(name, arguments)
            except TimeoutError:
                await self.stop()
                raise ToolFailure("timeout", f"no answer within {within_s:g} s; "
                                  + ("the server was stopped" if self.proc else "the connection was dropped")
                                  + " (the next call starts another)") from None
            except Exception as exc:
                closed = getattr(getattr(exc, "error", None), "code", None) == CONNECTION_CLOSED
                if closed or (self.proc is not None and not self.proc.alive):
                    ended = await self.proc.ended() if self.proc is not None else ""
                    how = ended or f"dropped the connection ({_why(exc)})"
                    await self.stop()
                    raise ToolFailure("crash", f"MCP server {self.label!r} {how} during the call "
                                               "(the next call starts it again)") from None
                raise ToolFailure("error", _why(exc)) from None
        if result.is_error:
            raise ToolFailure("error", _content_text(result.content) or "the tool reported an error")
        value = result.structured_content
        if value is None:
            return _content_value(result.content)
        return value["result"] if name in self.wrapped and isinstance(value, dict) and set(value) == {"result"} \
            else value

    async def stop(self) -> None:
        if self.proc is not None:
            await self.proc.kill()  # at once: a server stuck in a tool would not leave on its own
        self._stop.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            with anyio.move_on_after(3):
                await asyncio.wait([task])
            task.cancel()


def _wraps(output_schema: Mapping[str, Any] | None) -> bool:
    """An output schema of one required `result` (how MCPServer returns what is not an object)."""
    schema = output_schema or {}
    return set(schema.get("properties", {})) == {"result"} and schema.get("required") == ["result"]


def _why(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    error = getattr(exc, "error", None)  # MCPError carries ErrorData
    return str(getattr(error, "message", "") or exc or type(exc).__name__)


def _content_text(content: list[Any]) -> str:
    parts = []
    for block in content:
        text = getattr(block, "text", None)
        parts.append(text if text is not None else f"[{getattr(block, 'type', 'content')} "
                                                    f"{getattr(block, 'mime_type', '') or ''}]".replace(" ]", "]"))
    return "\n".join(parts)


def _content_value(content: list[Any]) -> Any:
    """A result without structured content: its one text (as JSON where it parses), else the texts."""
    texts = [_content_text([b]) for b in content]
    if len(texts) == 1:
        with contextlib.suppress(ValueError):
            return json.loads(texts[0])
        return texts[0]
    return texts


async def _gather(*starts: Coroutine[Any, Any, list[Any]]) -> list[Any]:
    """Every start's tools, or the ToolFailure that ended it."""
    async def one(start: Coroutine[Any, Any, list[Any]]) -> Any:
        try:
            return await start
        except ToolFailure as exc:
            return exc

    return list(await asyncio.gather(*(one(s) for s in starts)))


@contextlib.asynccontextmanager
async def _stdio_streams(proc: _ToolProcess) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's session streams over a process of ours (its stdio_client would start the server itself, where
    the limits of launch.py could not reach it, and stop it only after seconds of grace)."""
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    process = await proc.spawn()
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, BufferedByteReceiveStream(process.stdout)
    to_session, from_server = anyio.create_memory_object_stream[Any](0)
    to_server, from_session = anyio.create_memory_object_stream[Any](0)

    async def read() -> None:
        async with to_session:
            while True:
                try:
                    line = await stdout.receive_until(b"\n", MAX_LINE)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError,
                        anyio.DelimiterNotFound, OSError):
                    return
                try:
                    message: Any = SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as exc:
                    message = exc
                try:
                    await to_session.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def write() -> None:
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server is gone: the session sees its stream end

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield from_server, to_server
        finally:
            await proc.kill()
            tg.cancel_scope.cancel()


class ToolBox:
    """The tools of an env's tasks, started on first use and kept until close (sync facade over the loop)."""

    def __init__(self, folder: Path, limits: ToolLimits | None = None) -> None:
        self.folder = folder
        self.limits = limits or ToolLimits()
        self._loop = _Loop()
        self._python = PythonHost(folder, self.limits)
        self._servers: dict[str, McpServer] = {}
        self._listed: dict[str, list[ToolInfo]] = {}

    def tools(self, sources: list[PythonTool | StdioServer | HttpServer]) -> dict[str, ToolInfo]:
        """The tools ``sources`` offer, by name; starts what is not running (the servers at once). InvalidInput
        names a bad source, Unavailable a server that does not start."""
        self._start([s for s in sources if s.key not in self._listed and not isinstance(s, PythonTool)])
        out: dict[str, ToolInfo] = {}
        for source in sources:
            known = source.key in self._listed
            listed = self._listed[source.key] if known else self._describe(source)  # type: ignore[arg-type]
            for tool in listed:
                if tool.name in out or tool.name in META_TEMPLATES:
                    clash = "a meta action's name" if tool.name in META_TEMPLATES else "offered twice"
                    raise InvalidInput(f"tool {tool.name!r} of {source.key} is {clash}; rename it (a Python tool's "
                                       "'name') or leave it out (a server's 'tools' list)")
                out[tool.name] = tool
        return out

    def _describe(self, source: PythonTool) -> list[ToolInfo]:
        timeout = self.limits.start_timeout_s
        message = {"op": "describe", "ref": source.python, "name": source.name}
        try:
            reply = self._loop.run(self._python.request(message, timeout, timeout), 2 * timeout + 5)
        except ToolFailure as exc:
            raise InvalidInput(f"Python tool {source.python!r}: {exc}") from None
        t = reply["tool"]
        self._listed[source.key] = [ToolInfo(t["name"], t["description"], t["schema"], source.key, t["wants_state"])]
        return self._listed[source.key]

    def _start(self, sources: list[StdioServer | HttpServer]) -> None:
        servers = [self._servers.setdefault(s.key, McpServer(s, self.folder, self.limits)) for s in sources]
        timeout = self.limits.start_timeout_s
        started = self._loop.run(_gather(*(server.start(timeout) for server in servers)), timeout + 10)
        for source, server, tools in zip(sources, servers, started, strict=True):
            if isinstance(tools, ToolFailure):
                raise Unavailable(str(tools))
            wanted = set(source.tools) if source.tools is not None else None
            listed = [ToolInfo(t.name, t.description or "", t.input_schema, source.key) for t in tools
                      if wanted is None or t.name in wanted]
            missing = sorted((wanted or set()) - {t.name for t in listed})
            if missing:
                raise InvalidInput(f"MCP server {server.label!r} has no tool {missing[0]!r}; its tools: "
                                   f"{', '.join(t.name for t in tools)}")
            self._listed[source.key] = listed

    def call(self, tool: ToolInfo, ref: PythonTool | None, arguments: dict[str, Any], state: Any,
             timeout: float) -> tuple[Any, Any]:
        """(result, state after); a ToolFailure says why there is none."""
        restart = self.limits.restart_timeout_s
        if ref is not None:
            message = {"op": "call", "ref": ref.python, "arguments": arguments, "state": state}
            reply = self._loop.run(self._python.request(message, timeout, restart), timeout + restart + 10)
            return reply.get("result"), reply.get("state")
        server = self._servers[tool.source]
        return self._loop.run(server.call(tool.name, arguments, timeout, restart), timeout + restart + 10), state

    def check(self, ref: str, offered: dict[str, Any], timeout: float) -> Any:
        restart = self.limits.restart_timeout_s
        message = {"op": "check", "ref": ref, **offered}
        return self._loop.run(self._python.request(message, timeout, restart), timeout + restart + 10)["result"]

    def close(self) -> None:
        async def stop_all() -> None:
            await self._python.close()
            for server in self._servers.values():
                await server.stop()

        with contextlib.suppress(Exception):
            self._loop.run(stop_all(), 15)
        self._loop.close()
