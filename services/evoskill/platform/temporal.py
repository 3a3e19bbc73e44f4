"""The Temporal client every evoskill process uses: the orchestrator's worker and the CLI's starters."""

from __future__ import annotations

import logging
import os
import sys
import uuid
from typing import NoReturn

from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from evoskill.platform.config import Settings

_connections = 0  # the clients this process has made (`exit_process`)


async def connect(settings: Settings, attempts: int = 30, wait_s: float = 1.0) -> Client:
    """Connect to Temporal, waiting for a server that is still starting (`attempts` tries, `wait_s` apart; the
    last failure is raised). The tracing interceptor makes a workflow started by this client one trace with its
    activities and the services they call."""
    global _connections
    _connections += 1
    async for attempt in AsyncRetrying(stop=stop_after_attempt(attempts), wait=wait_fixed(wait_s),
                                       retry=retry_if_exception_type(RuntimeError), reraise=True):
        with attempt:
            return await Client.connect(
                settings.temporal_address, namespace=settings.temporal.namespace, interceptors=[TracingInterceptor()]
            )
    raise AssertionError("unreachable: the last attempt returns or raises")


def workflow_id(kind: str) -> str:
    """A new workflow id, `kind-` and 8 hex digits (train-1a2b3c4d): what `evoskill runs` and Temporal's UI list."""
    return f"{kind}-{uuid.uuid4().hex[:8]}"


def connections() -> int:
    """The Temporal clients this process has made so far (a process that made one ends through `exit_process`)."""
    return _connections


def exit_process(code: int) -> NoReturn:
    """End a process that made a Temporal client with `code`. The client's Rust threads can still call into Python
    while the interpreter finalises, which aborts it (SIGABRT, exit -6 whatever the command's own code; temporalio
    sdk-python issue 300, seen here on the health starter): telemetry, logs and output are flushed, then the process
    ends without the interpreter's teardown."""
    from evoskill.platform.telemetry import shutdown_telemetry

    shutdown_telemetry()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
