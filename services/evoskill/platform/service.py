"""The process shell every service shares: telemetry, bus, gRPC server, signals, orderly shutdown.

A service module provides `async def create(settings, bus) -> ServiceParts`; `run_service` wires it
to the transports. The core logic the service wraps never sees any of this.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import grpc

from evoskill.core.errors import InvalidInput
from evoskill.platform.bus import Bus
from evoskill.platform.config import SERVICES, Settings
from evoskill.platform.rpc import GrpcServer, start_server
from evoskill.platform.telemetry import setup_telemetry, shutdown_telemetry

log = logging.getLogger(__name__)
STOP_STEP_S = 15.0  # what each step of a service's stop may take (RunningService.stop)
CANCEL_GRACE_S = 2.0  # what a step past STOP_STEP_S is then given to end after its cancellation

Registration = tuple[Callable[[Any, grpc.aio.Server], None], Any, str]


@dataclass
class ServiceParts:
    """What a service contributes: gRPC servicers, background tasks and cleanup hooks."""

    registrations: list[Registration] = field(default_factory=list)
    background: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


ServiceFactory = Callable[[Settings, Bus], Awaitable[ServiceParts]]


def load_factory(service: str) -> ServiceFactory:
    """Import only the chosen service (torch and the environments are heavy)."""
    if service not in SERVICES:
        raise InvalidInput(f"unknown service {service!r}; expected one of {', '.join(SERVICES)}")
    module = importlib.import_module(f"evoskill.{service}.service")
    factory: ServiceFactory = module.create
    return factory


@dataclass
class RunningService:
    name: str
    bus: Bus
    server: GrpcServer
    parts: ServiceParts
    tasks: list[asyncio.Task[None]]

    async def stop(self) -> None:
        """Stop serving, leave the bus, close the parts, cancel the background jobs; each step gets at most
        STOP_STEP_S, so that one wedged part (a call that never returns) cannot keep the process from exiting.
        The bus before the parts: a consumer still handed messages after its store closed fails their deliveries,
        and each failure counts toward the dead letter (the memory service's did at every stop)."""
        await self._bounded("the gRPC server", self.server.stop())
        await self._bounded("the bus", self.bus.stop())
        for close in reversed(self.parts.closers):
            await self._bounded(f"cleanup {getattr(close, '__qualname__', close)}", close())
        for task in self.tasks:
            task.cancel()
        await self._bounded("the background jobs", asyncio.gather(*self.tasks, return_exceptions=True))

    async def _bounded(self, what: str, step: Awaitable[Any]) -> None:
        # Not asyncio.wait_for: on timeout it waits for the cancelled step to finish, without limit, so a step
        # that does not end when cancelled (one that swallows its CancelledError) would hold the stop for ever.
        # The cancellation is asked for and given CANCEL_GRACE_S, then the step is left behind.
        task = asyncio.ensure_future(step)
        try:
            done, _ = await asyncio.wait({task}, timeout=STOP_STEP_S)
        except asyncio.CancelledError:
            task.cancel()  # the stop itself was cancelled: so is its step
            raise
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
            log.error("%s: stopping %s took over %.0f s; went on without it", self.name, what, STOP_STEP_S)
        elif not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s: stopping %s failed", self.name, what, exc_info=exc)


async def start_service(name: str, settings: Settings, factory: ServiceFactory | None = None) -> RunningService:
    setup_telemetry(name, settings.telemetry, state_dir=settings.state_dir)
    factory = factory or load_factory(name)
    bus = Bus(settings, name)
    parts = await factory(settings, bus)
    await bus.start()
    endpoint = settings.endpoint(name)
    server = await start_server(parts.registrations, f"{settings.bind_host or endpoint.host}:{endpoint.port}",
                                settings.grpc)
    tasks: list[asyncio.Task[None]] = [asyncio.create_task(job()) for job in parts.background]
    log.info("%s serving gRPC on port %d", name, server.port)
    return RunningService(name, bus, server, parts, tasks)


async def run_service(name: str, settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then drain and stop."""
    running = await start_service(name, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("%s stopping", name)
    await running.stop()
    shutdown_telemetry()
