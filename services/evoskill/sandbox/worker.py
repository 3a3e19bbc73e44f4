"""Environment worker processes: one environment per process, replaced when it crashes or hangs.

The parent talks to a worker over a pipe (pickled tuples). A worker confines itself first (confine.py, in a
folder of its own the parent makes and removes) and says what it got. A call that exceeds the step timeout
kills the worker's whole process group (the JVM included) and fails with TimeoutError; a worker that
dies mid-call fails it with WorkerCrashed; a worker whose resident memory (with every process under it: the
JVM, tool processes) exceeds the cap, watched while a call runs and after it, is killed and the call fails
with ResourceExhausted (its JVMs' heap is capped to fit: envs/jvm.heap_options). The service then starts a
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
import shutil
import signal
import tempfile
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import psutil

from evoskill.core import errors
from evoskill.envs.jvm import heap_options
from evoskill.sandbox import cgroup
from evoskill.sandbox.confine import Confinement, Policy, confine

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


def _worker_main(conn: Connection, policy: Policy, folder: str, limits: dict[str, Any] | None = None,
                 java_options: str = "") -> None:
    os.setpgid(0, 0)  # own process group: killing it takes the JVM along
    try:
        conn.send(("ready", confine(policy, folder)))  # before any import that may start a thread
        if java_options:  # every JVM it starts (envs/jvm.py)
            inherited = os.environ.get("JAVA_TOOL_OPTIONS")
            os.environ["JAVA_TOOL_OPTIONS"] = f"{inherited} {java_options}" if inherited else java_options
    except Exception as exc:  # the answer to the first call: this worker runs nothing
        conn.send(("error", ("Unavailable", type(exc).__name__, f"the environment worker could not confine "
                             f"itself: {exc}", traceback.format_exc(limit=8))))
        return
    from evoskill.sandbox.host import EnvHost, Faults

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
        results, steps = host.simulate(probes, *args[1:])
        return [r.SerializeToString() for r in results], steps
    raise ValueError(f"unknown worker command {command!r}")


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _tree(pid: int, proportional: bool = False) -> tuple[float, float]:
    """Resident memory (MiB) and CPU time (s) of the worker and every process under it (its group, the JVM, tool
    processes in sessions of their own). Memory is RSS, or with ``proportional`` the PSS (slower to read: the
    kernel walks page tables), which never exceeds it and counts a page shared by a fork's processes once."""
    parents = {p.pid: p.info["ppid"] for p in psutil.process_iter(["ppid"])}
    ours, frontier = set(), {pid} | {p for p in parents if _group(p) == pid}
    while frontier:
        ours |= frontier
        frontier = {p for p, parent in parents.items() if parent in frontier and p not in ours}
    rss = pss = cpu = 0.0
    for p in ours:
        try:
            process = psutil.Process(p)
            with process.oneshot():
                times, resident = process.cpu_times(), process.memory_info().rss
            cpu += times.user + times.system
        except psutil.Error:  # gone meanwhile
            continue
        rss += resident
        if proportional:  # the Pss line of /proc/<pid>/smaps_rollup, as psutil reads it; RSS where unreadable
            with contextlib.suppress(psutil.Error):
                resident = process.memory_full_info().pss
            pss += resident
    return (pss if proportional else rss) / 2**20, cpu
WATCH_S = 0.25  # how often a running call's memory is looked at
_told: set[str] = set()  # fallbacks already logged by this process


def _log_fallbacks(confinement: Confinement) -> None:
    for note in confinement.notes:
        if note not in _told:
            _told.add(note)
            log.warning("environment workers run with less isolation than configured: %s "
                        "(docs/operations.md, 'Bad input and faults')", note)


def _died(code: int | None) -> str:
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        return f"killed by {name}" + (" (its CPU time limit, sandbox.cpu_s)" if name == "SIGXCPU" else "")
    return f"exit code {code}"


class Worker:
    """Parent-side handle of one worker process; calls are serialised by a lock. ``step_timeout_s`` (with
    ``memory_mb``) reaches an environment that runs processes of its own (EnvHost.open's ``limits``)."""

    def __init__(self, memory_mb: int, step_timeout_s: float | None = None, policy: Policy | None = None) -> None:
        self.memory_mb = memory_mb
        self.policy = policy or Policy()
        self.folder = tempfile.mkdtemp(prefix="evoskill-worker-")
        self.confinement: Confinement | None = None  # what it got, once it said so (the first call)
        self._conn, child = _CTX.Pipe()
        limits = {"step_timeout_s": step_timeout_s, "memory_mb": memory_mb} if step_timeout_s else None
        java = heap_options(memory_mb) if memory_mb else ""
        self.process = _CTX.Process(target=_worker_main, args=(child, self.policy, self.folder, limits, java),
                                    daemon=True)
        try:
            self.process.start()
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        assert self.process.pid is not None
        self.pid: int = self.process.pid
        child.close()
        self._lock = threading.Lock()
        self.scheme = ""

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def cpu_s(self) -> float:
        """CPU time its processes alive now have used (each is held to ``policy.cpu_s``)."""
        return _tree(self.pid)[1]

    def _watch_memory(self) -> None:
        if self.memory_mb and _tree(self.pid)[0] > self.memory_mb and _tree(self.pid, True)[0] > self.memory_mb:
            self.kill()
            raise errors.ResourceExhausted(f"environment worker exceeded its memory cap of {self.memory_mb} MiB; "
                                           "it was killed and the session is lost")

    def _reply(self, timeout_s: float, command: str) -> tuple[str, Any]:
        """The worker's answer to the call just sent, its memory watched while it runs."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise TimeoutError(f"environment call {command!r} took longer than {timeout_s:.1f}s; "
                                   "its worker was killed and replaced")
            if self._conn.poll(min(left, WATCH_S)):
                status, payload = self._conn.recv()
                if status != "ready":
                    return status, payload
                self.confinement = payload
                _log_fallbacks(payload)
            else:
                self._watch_memory()

    def _call_blocking(self, timeout_s: float, message: tuple[Any, ...]) -> Any:
        with self._lock:
            try:
                self._conn.send(message)
                status, payload = self._reply(timeout_s, message[0])
            except (TimeoutError, errors.ResourceExhausted):
                raise  # ours, above (TimeoutError is an OSError too): the worker did not die by itself
            except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
                self.kill()
                raise WorkerCrashed(f"environment worker died during {message[0]!r} "
                                    f"({_died(self.process.exitcode)}); the session is lost") from exc
        self._watch_memory()
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
        cgroup.stop(self.pid)  # where it has one: whatever it started that is still running
        shutil.rmtree(self.folder, ignore_errors=True)

    def close(self) -> None:
        if self.alive:
            with contextlib.suppress(OSError, BrokenPipeError):
                self._conn.send(("exit",))
            self.process.join(timeout=5)
        self.kill()
