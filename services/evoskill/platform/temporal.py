"""The Temporal client every evoskill process uses: the orchestrator's worker and the CLI's starters."""

from __future__ import annotations

import uuid

from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_fixed

from evoskill.platform.config import Settings


async def connect(settings: Settings, attempts: int = 30, wait_s: float = 1.0) -> Client:
    """Connect to Temporal, waiting for a server that is still starting (`attempts` tries, `wait_s` apart; the
    last failure is raised). The tracing interceptor makes a workflow started by this client one trace with its
    activities and the services they call."""
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
