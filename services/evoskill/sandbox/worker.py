"""Environment worker processes: one environment per process, replaced when it crashes or hangs.

The parent talks to a worker over a pipe (pickled tuples). A call that exceeds the step timeout
kills the worker's whole process group (the JVM included) and fails with TimeoutError; a worker that
dies mid-call fails it with WorkerCrashed; a worker whose memory (with its children, e.g. the JVM)
exceeds the cap is killed and the call fails with ResourceExhaustedError. The service then starts a
fresh worker; the session that lived in the dead one is gone, and the error says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from evoskill.platform.rpc import ResourceExhaustedError

_CTX = mp.get_context("spawn")  # never fork a process that runs gRPC's threads


class WorkerCrashed(RuntimeError):
    """The worker process died during the call."""


def _worker_main(conn: Connection) -> None:
    os.setpgid(0, 0)  # own process group: killing it takes the JVM along
    from evoskill.sandbox.host import EnvHost, Faults

    host: EnvHost | None = None
    while True:
        try:
            message = conn.recv()
        except EOFError:
            break
        command, args = message[0], message[1:]
        try:
            if command == "open":
                spec, seed, fold, episode_id, faults, read_only, gold, cache_dir = args
                if host is not None:
                    host.close()
                host, obs = EnvHost.open(spec, seed, fold, episode_id, Faults(*faults), read_only, gold, cache_dir)
                result: Any = (obs.SerializeToString(), host.env.gold_path() or [])
            elif command == "exit":
                break
            else:
                assert host is not None, "no environment is open in this worker"
                result = _dispatch(host, command, args)
            conn.send(("ok", result))
        except Exception as exc:
            conn.send(("error", (type(exc).__name__, str(exc), traceback.format_exc(limit=3))))
    if host is not None:
        host.close()


def _dispatch(host: Any, command: str, args: tuple[Any, ...]) -> Any:
    from evoskill.sandbox.v1 import sandbox_pb2

    if command == "step":
        return host.step(args[0]).SerializeToString()
    if command == "reset":
        return host.reset(*args).SerializeToString()
    if command == "valid":
        actions = host.env.valid_actions()
        return list(zip(actions, host.templates(actions), strict=True))
    if command == "simulate":
        probes = [sandbox_pb2.Probe.FromString(p) for p in args[0]]
        results, steps = host.simulate(probes, args[1])
        return [r.SerializeToString() for r in results], steps
    if command == "replay":
        for action in args[0]:
            host.step(action)
        return host.env.observation().SerializeToString()
    raise ValueError(f"unknown worker command {command!r}")


_ERRORS: dict[str, Callable[[str], Exception]] = {
    "InvalidActionError": ValueError,
    "EnvSpecError": ValueError,
    "ValueError": ValueError,
    "PermissionError": PermissionError,
    "EnvStateError": ValueError,
    "KeyError": KeyError,
}


def _rss_mb(pgid: int) -> float:
    """Resident memory of every process in the group (worker + JVM), in MiB."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[2]) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total / 1024


class Worker:
    """Parent-side handle of one worker process; calls are serialised by a lock."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        self._conn, child = _CTX.Pipe()
        self.process = _CTX.Process(target=_worker_main, args=(child,), daemon=True)
        self.process.start()
        assert self.process.pid is not None
        self.pid: int = self.process.pid
        child.close()
        self._lock = threading.Lock()
        self.scheme = ""

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def _call_blocking(self, timeout_s: float, message: tuple[Any, ...]) -> Any:
        with self._lock:
            try:
                self._conn.send(message)
                ready = self._conn.poll(timeout_s)
                if not ready:
                    self.kill()
                    raise TimeoutError(f"environment call {message[0]!r} took longer than {timeout_s:.1f}s; "
                                       "its worker was killed and replaced")
                status, payload = self._conn.recv()
            except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
                self.kill()
                raise WorkerCrashed(f"environment worker died during {message[0]!r} "
                                    f"(exit code {self.process.exitcode}); the session is lost") from exc
        if self.memory_mb and _rss_mb(self.pid) > self.memory_mb:
            self.kill()
            raise ResourceExhaustedError(f"environment worker exceeded its memory cap of {self.memory_mb} MiB; "
                                         "it was killed and the session is lost")
        if status == "error":
            name, text, _ = payload
            raise _ERRORS.get(name, RuntimeError)(f"{text}" if name in _ERRORS else f"{name}: {text}")
        return payload

    async def call(self, timeout_s: float, *message: Any) -> Any:
        return await asyncio.to_thread(self._call_blocking, timeout_s, message)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.join(timeout=5)
        self._conn.close()

    def close(self) -> None:
        if self.alive:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send(("exit",))
            self.process.join(timeout=5)
        self.kill()
