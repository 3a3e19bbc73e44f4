"""Environment worker processes: one environment per process, replaced when it crashes or hangs.

The parent talks to a worker over a pipe (pickled tuples). A call that exceeds the step timeout
kills the worker's whole process group (the JVM included) and fails with TimeoutError; a worker that
dies mid-call fails it with WorkerCrashed; a worker whose memory (with its children, e.g. the JVM)
exceeds the cap is killed and the call fails with ResourceExhausted. The service then starts a
fresh worker; the session that lived in the dead one is gone, and the error says so. A domain error
(`evoskill.core.errors`) raised in the worker is raised again in the parent as its kind; anything else
is a bug, logged with the worker's stack trace and raised as WorkerError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing as mp
import os
import signal
import threading
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from evoskill.core import errors

log = logging.getLogger(__name__)
_CTX = mp.get_context("spawn")  # never fork a process that runs gRPC's threads


class WorkerCrashed(errors.Unavailable):
    """The worker process died during the call."""


class WorkerError(Exception):
    """The worker's code failed in a way no domain error describes (a bug)."""


# The kinds that cross the pipe, most specific first; any other exception is a bug.
_CROSSING: tuple[type[Exception], ...] = (errors.InvalidInput, errors.NotFound, errors.FailedPrecondition,
                                          errors.ResourceExhausted, errors.Unavailable, errors.PermissionDenied,
                                          TimeoutError)


def _kind(exc: Exception) -> str:
    return next((kind.__name__ for kind in _CROSSING if isinstance(exc, kind)), "")


def _worker_main(conn: Connection, limits: dict[str, Any] | None = None) -> None:
    os.setpgid(0, 0)  # own process group: killing it takes the JVM along
    from evoskill.sandbox.confine import confine
    from evoskill.sandbox.host import EnvHost, Faults

    confine()

    host: EnvHost | None = None
    opened: tuple[Any, ...] = ()  # what `host` was opened with, but the game
    while True:
        try:
            message = conn.recv()
        except EOFError:
            break
        command, args = message[0], message[1:]
        try:
            if command == "open":
                spec, seed, fold, episode_id, faults, read_only, gold, cache_dir = args
                obs = None
                if host is not None and opened == (spec, faults, read_only, gold, cache_dir):
                    # The same environment for the next game: a reset, not a new JVM (seconds a session).
                    host.episode_id, host.seed = episode_id, seed
                    with contextlib.suppress(Exception):
                        obs = host.reset(seed, fold)
                if host is None or obs is None:  # another environment, or one that failed to reset: a fresh one
                    if host is not None:
                        host.close()
                        host = None
                    host, obs = EnvHost.open(spec, seed, fold, episode_id, Faults(*faults), read_only, gold,
                                             cache_dir, limits)
                    opened = (spec, faults, read_only, gold, cache_dir)
                result: Any = (obs.SerializeToString(), host.env.gold_path() or [])
            elif command == "exit":
                break
            else:
                assert host is not None, "no environment is open in this worker"
                result = _dispatch(host, command, args)
            conn.send(("ok", result))
        except Exception as exc:
            conn.send(("error", (_kind(exc), type(exc).__name__, str(exc), traceback.format_exc(limit=8))))
    if host is not None:
        host.close()


def _dispatch(host: Any, command: str, args: tuple[Any, ...]) -> Any:
    from evoskill.sandbox.v1 import sandbox_pb2

    if command == "step":
        return host.step(args[0]).SerializeToString()
    if command == "simulate":
        probes = [sandbox_pb2.Probe.FromString(p) for p in args[0]]
        results, steps = host.simulate(probes, args[1])
        return [r.SerializeToString() for r in results], steps
    raise ValueError(f"unknown worker command {command!r}")


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
    """Parent-side handle of one worker process; calls are serialised by a lock. ``step_timeout_s`` (with
    ``memory_mb``) reaches an environment that runs processes of its own (EnvHost.open's ``limits``)."""

    def __init__(self, memory_mb: int, step_timeout_s: float | None = None) -> None:
        self.memory_mb = memory_mb
        self._conn, child = _CTX.Pipe()
        limits = {"step_timeout_s": step_timeout_s, "memory_mb": memory_mb} if step_timeout_s else None
        self.process = _CTX.Process(target=_worker_main, args=(child, limits), daemon=True)
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
            except TimeoutError:
                raise  # ours, above (an OSError too): the call was slow, the worker did not die by itself
            except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
                self.kill()
                raise WorkerCrashed(f"environment worker died during {message[0]!r} "
                                    f"(exit code {self.process.exitcode}); the session is lost") from exc
        if self.memory_mb and _rss_mb(self.pid) > self.memory_mb:
            self.kill()
            raise errors.ResourceExhausted(f"environment worker exceeded its memory cap of {self.memory_mb} MiB; "
                                         "it was killed and the session is lost")
        if status == "error":
            kind, name, text, trace = payload
            if kind:
                raise next(k for k in _CROSSING if k.__name__ == kind)(text)
            log.error("environment worker (pid %d) failed in %r:\n%s", self.pid, message[0], trace)
            raise WorkerError(f"{name} in the environment worker during {message[0]!r}: {text}")
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
