"""The Temporal client every evoskill process uses: the orchestrator's worker and the CLI's starters."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor

from evoskill.platform.config import Settings


async def connect(settings: Settings, attempts: int = 30) -> Client:
    """Connect to Temporal, waiting for a server that is still starting. The tracing interceptor makes a
    workflow started by this client one trace with its activities and the services they call."""
    for attempt in range(attempts):
        try:
            return await Client.connect(
                settings.temporal_address, namespace=settings.temporal.namespace, interceptors=[TracingInterceptor()]
            )
        except RuntimeError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    raise RuntimeError("unreachable")
