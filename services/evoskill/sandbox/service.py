"""The sandbox process: environment sessions over gRPC, each in its own worker process.

Session = one worker (one environment instance) + its step budget. Real steps publish `step.executed`;
search-time probes (`Simulate`) never change the session and never publish, and answer what they can within
the call's deadline (`simulate_budget`): a search that runs out of time keeps its episode. A session lives in
this replica's memory, so its id names this replica (`<advertised address>/<id>`, see `platform.replicas`):
callers dial the owner, and a call that reaches another replica is answered NOT_FOUND naming the owner. A
session that no call has used for `sandbox.session_idle_s` (its client is gone: crashed, killed, cancelled) is
closed and its worker stopped, so an abandoned session does not hold a worker and its JVM until `max_sessions`
push it out.
Workers are confined (confine.py): a game that needs the network (`EnvScheme.network`) gets a worker of the
host's network where `sandbox.network` allows, every other game one whose connections never leave it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import FailedPrecondition, InvalidInput, NotFound, ResourceExhausted
from evoskill.envs import parse_spec
from evoskill.envs.registry import needs_network
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import SandboxSettings, Settings
from evoskill.platform.replicas import owned_id, owner_of
from evoskill.platform.rpc import rpc_method
from evoskill.platform.service import ServiceParts
from evoskill.platform.telemetry import tracer
from evoskill.sandbox import cgroup
from evoskill.sandbox.confine import Policy, becomes
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
from evoskill.sandbox.worker import Worker

log = logging.getLogger(__name__)
SERVICE_NAME = "evoskill.sandbox.v1.SandboxService"
FOLDS = ("train", "dev", "test")
REPLY_SHARE, REPLY_S = 0.25, 0.25  # of a Simulate's remaining time, kept for its reply (simulate_budget)
# Step timeouts a call that replays a replay-only environment's episode (a probe, a real step after a search)
# may take before its worker is thought hung: on 2 loaded cores a ScienceWorld probe took 6-15 s.
REPLAY_STEPS = 3


@dataclass
class Session:
    id: str
    episode_id: str
    worker: Worker
    quota: int
    steps_used: int = 0
    last_used: float = field(default_factory=time.monotonic)
    calls: int = 0  # in flight: a session in use is never idle, however long its call takes
    gold_path: list[str] = field(default_factory=list)
    searched: bool = False  # a Simulate moved its environment since the last real step

    def charge(self, steps: int) -> None:
        self.steps_used += steps
        self.last_used = time.monotonic()
        if self.steps_used > self.quota:
            raise ResourceExhausted(
                f"session {self.id} used {self.steps_used} environment steps, over its quota of {self.quota}"
            )


def simulate_budget(time_remaining: float | None) -> float | None:
    """What a `Simulate` may spend on probes of the time its caller's deadline leaves (None: no deadline); the
    rest carries the reply back on a loaded machine."""
    if time_remaining is None:
        return None
    return max(time_remaining * (1 - REPLY_SHARE) - REPLY_S, 0.0)


def envs_cache_dir(settings: Settings) -> Path:
    """Where environments keep what they generate (`envs.cache_dir`), absolute."""
    return (settings.envs.cache_dir or settings.state_dir / "cache").resolve()


def textworld_cache_dir(settings: Settings) -> str:
    """Where tw-make's games are kept, shared by every environment of the stack (absolute)."""
    return str(envs_cache_dir(settings) / "textworld")


def _writable_by_workers(folder: str, run_as: str) -> None:
    """Make ``folder`` (the game cache) and let a root sandbox's workers write there: they become ``run_as``
    where that user can run the interpreter, else stay root without capabilities (confine.py), who cannot
    write another user's folder either; so the folder is given to whoever the workers will be."""
    os.makedirs(folder, exist_ok=True)
    if os.geteuid() != 0:
        return
    user, _ = becomes(run_as)  # the workers say why they stay root
    uid, gid = (user.pw_uid, user.pw_gid) if user else (os.geteuid(), os.getegid())
    for path, _, files in os.walk(folder):
        for name in [path, *(os.path.join(path, f) for f in files)]:
            with contextlib.suppress(OSError):
                os.chown(name, uid, gid)


class SandboxServicer(sandbox_pb2_grpc.SandboxServiceServicer):
    def __init__(self, settings: Settings, bus: Bus | None) -> None:
        self.settings: SandboxSettings = settings.sandbox
        self.cache_dir = textworld_cache_dir(settings)  # tw-make's games, shared by the workers
        self.bus = bus
        self.address = settings.endpoint("sandbox").advertised  # names the sessions this replica holds
        self.sessions: dict[str, Session] = {}
        self.idle: dict[bool, list[Worker]] = {False: [], True: []}  # by whether they have the host's network
        self.opened = 0  # sessions this replica has made (their ids count them)
        _writable_by_workers(self.cache_dir, self.settings.run_as)
        cgroup.sweep()  # what a killed sandbox left

    # -- workers ----------------------------------------------------------------------------------
    def _policy(self, network: bool) -> Policy:
        s = self.settings
        return Policy(network=network, private_files=s.private_files, writable=(self.cache_dir,), run_as=s.run_as,
                      max_processes=s.max_processes, cpu_s=s.cpu_s, max_open_files=s.max_open_files,
                      max_file_mb=s.max_file_mb)

    def _network(self, spec: str) -> bool:
        """Whether the game's worker gets the host's network (a bad spec fails here, naming the problem)."""
        parsed = parse_spec(spec)
        if self.settings.network == "host":
            return True
        if not needs_network(parsed):
            return False
        if self.settings.network == "none":
            raise FailedPrecondition(f"{spec[:200]!r} reaches the network (an MCP server over HTTP) and this "
                                     "sandbox's workers have none (sandbox.network is 'none')")
        return True

    def _worker(self, network: bool) -> Worker:
        idle = self.idle[network]
        while idle:
            worker = idle.pop()
            if worker.alive:
                return worker
        return Worker(self.settings.memory_mb, self.settings.step_timeout_s, self._policy(network))

    def _release(self, worker: Worker) -> None:
        idle = self.idle[worker.policy.network]
        # Each of its processes is held to cpu_s of CPU: one that used half of it plays no more sessions.
        if worker.alive and len(idle) < 4 and worker.cpu_s() < worker.policy.cpu_s / 2:
            idle.append(worker)  # keeps its JVM warm for the next session
        else:
            worker.close()

    def _session(self, session_id: str) -> Session:
        if not session_id:
            raise InvalidInput("session_id is empty")
        if (owner := owner_of(session_id)) != self.address:
            raise NotFound(f"session {session_id!r} is held by sandbox replica {owner}, not by this one "
                           f"({self.address}): call its owner")
        session = self.sessions.get(session_id)
        if session is None:
            raise NotFound(f"no session {session_id!r} (closed, expired, or its worker crashed)")
        return session

    async def _call(self, session: Session, *message: object, timeout_s: float | None = None) -> object:
        session.calls += 1
        try:
            return await session.worker.call(timeout_s or self.settings.step_timeout_s, *message)
        except Exception:
            if not session.worker.alive:
                self.sessions.pop(session.id, None)  # its environment died with the worker
            raise
        finally:
            session.calls -= 1
            session.last_used = time.monotonic()

    async def close_idle(self, now: float) -> int:
        """Close the sessions idle for longer than `session_idle_s` and stop their workers; how many."""
        closed = 0
        for session in list(self.sessions.values()):
            # Judged one at a time: a call may have come in while the previous worker was stopping.
            if session.calls or now - session.last_used <= self.settings.session_idle_s:
                continue
            log.warning("closing session %s: no call for %.0f s (its client is gone)", session.id,
                        now - session.last_used)
            self.sessions.pop(session.id, None)
            await asyncio.to_thread(session.worker.close)  # not back to the pool: its JVM is freed
            closed += 1
        return closed

    async def expire_idle(self) -> None:
        """Background task: `close_idle` a few times per `session_idle_s`."""
        while True:
            await asyncio.sleep(min(self.settings.session_idle_s / 4, 30.0))
            await self.close_idle(time.monotonic())

    async def _evict_if_full(self) -> None:
        while len(self.sessions) >= self.settings.max_sessions:
            oldest = min(self.sessions.values(), key=lambda s: s.last_used)
            log.warning("closing idle session %s: %d sessions open", oldest.id, len(self.sessions))
            self._close(oldest)

    def _close(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        self._release(session.worker)

    async def _open(self, spec: str, seed: int, fold: str, episode_id: str, quota: int,
                    gold: bool) -> tuple[Session, common_pb2.Observation]:
        network = self._network(spec)  # a bad spec fails here, naming the problem, before any worker work
        if fold not in FOLDS:
            raise InvalidInput(f"fold {fold!r} is not one of {', '.join(FOLDS)}")
        await self._evict_if_full()
        worker = self._worker(network)
        self.opened += 1
        session = Session(
            id=owned_id(self.address, f"s{self.opened}-{uuid.uuid4().hex[:8]}"),
            episode_id=episode_id or uuid.uuid4().hex, worker=worker, quota=quota or self.settings.step_quota,
        )
        faults = (self.settings.fault_probability, self.settings.fault_timeout_probability)
        try:
            obs_bytes, gold_path = await worker.call(
                max(self.settings.step_timeout_s, 120.0),  # first load may start a JVM or run tw-make
                "open", spec, seed, fold, session.episode_id, faults, self.settings.read_only, gold, self.cache_dir,
            )
        except Exception:
            self._release(worker)
            raise
        session.gold_path = list(gold_path)
        session.last_used = time.monotonic()  # idle from now, not from before the (possibly long) open
        self.sessions[session.id] = session
        return session, common_pb2.Observation.FromString(obs_bytes)

    def _reply(self, session: Session, obs: common_pb2.Observation) -> sandbox_pb2.SessionReply:
        return sandbox_pb2.SessionReply(session_id=session.id, episode_id=session.episode_id, observation=obs,
                                        gold_path=session.gold_path)

    # -- RPCs -------------------------------------------------------------------------------------
    @rpc_method
    async def CreateSession(self, request: sandbox_pb2.CreateSessionRequest,
                            context: grpc.aio.ServicerContext) -> sandbox_pb2.SessionReply:
        if not request.env_spec:
            raise InvalidInput("env_spec is empty; e.g. 'twx:coin' or 'sciworld:boil'")
        session, obs = await self._open(request.env_spec, request.seed, request.fold or "train",
                                        request.episode_id, request.step_quota, request.gold_path)
        return self._reply(session, obs)

    @rpc_method
    async def Step(self, request: sandbox_pb2.StepRequest,
                   context: grpc.aio.ServicerContext) -> sandbox_pb2.StepReply:
        session = self._session(request.session_id)
        if not request.action:
            raise InvalidInput("action is empty")
        session.charge(1)
        with tracer().start_as_current_span("sandbox.step") as span:
            span.set_attribute("evoskill.episode_id", session.episode_id)
            span.set_attribute("evoskill.action", request.action)
            # After a search, the environment first goes back to the session's state: without a state copy, a
            # replay of the episode, which may take as long as a step.
            timeout_s = self.settings.step_timeout_s * (REPLAY_STEPS if session.searched else 1)
            played = await self._call(session, "step", request.action, timeout_s=timeout_s)
            transition = common_pb2.Transition.FromString(played)  # type: ignore[arg-type]
            session.searched = False
            if request.publish and self.bus is not None:
                await self.bus.publish(Subjects.STEP_EXECUTED, events_pb2.StepExecuted(transition=transition))
        return sandbox_pb2.StepReply(transition=transition)

    @rpc_method
    async def Simulate(self, request: sandbox_pb2.SimulateRequest,
                       context: grpc.aio.ServicerContext) -> sandbox_pb2.SimulateReply:
        session = self._session(request.session_id)
        if not 0.0 < (request.gamma or 1.0) <= 1.0:
            raise InvalidInput(f"gamma {request.gamma} is outside (0, 1]")
        probes = [p.SerializeToString() for p in request.probes]
        budget_s = simulate_budget(context.time_remaining())
        # The worker's watchdog, for a hung environment: a probe (a replay and a rollout) may start just inside
        # the budget; without a deadline, that much per probe. Killing a slow one would lose the episode.
        probe_s = self.settings.step_timeout_s * REPLAY_STEPS
        timeout_s = budget_s + probe_s if budget_s is not None else probe_s * max(len(probes), 1)
        reply: tuple[list[bytes], int] = await self._call(  # type: ignore[assignment]
            session, "simulate", probes, request.gamma or 1.0, budget_s, timeout_s=timeout_s
        )
        results, steps = reply
        session.charge(steps)
        session.searched = True
        return sandbox_pb2.SimulateReply(results=[sandbox_pb2.ProbeResult.FromString(r) for r in results],
                                         env_steps=steps, partial=len(results) < len(probes))

    @rpc_method
    async def CloseSession(self, request: sandbox_pb2.CloseSessionRequest,
                           context: grpc.aio.ServicerContext) -> sandbox_pb2.CloseSessionReply:
        session = self._session(request.session_id)
        self._close(session)
        return sandbox_pb2.CloseSessionReply(steps=session.steps_used)

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            session.worker.close()
        for idle in self.idle.values():
            for worker in idle:
                worker.close()
            idle.clear()
        self.sessions.clear()

    async def kill_worker(self, session_id: str) -> None:
        """Tests and fault drills: the session's worker dies as if it crashed."""
        await asyncio.to_thread(self._session(session_id).worker.kill)


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    if not settings.endpoint("sandbox").port:
        raise InvalidInput("sandbox_endpoint.port is 0: a sandbox names its sessions by its own address, so it "
                           "needs a fixed port")
    servicer = SandboxServicer(settings, bus)
    return ServiceParts(
        registrations=[(sandbox_pb2_grpc.add_SandboxServiceServicer_to_server, servicer, SERVICE_NAME)],
        background=[servicer.expire_idle],
        closers=[servicer.close],
    )
