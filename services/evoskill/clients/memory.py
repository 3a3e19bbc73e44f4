"""A MemoryService stub for `evoskill memory`: the running memory service when one answers, else the same
servicer over the configured store, served in this process on a loopback port for the command's duration.

Either way every command goes through the memory's RPCs: one code path, the service's checks, and no
second opener of a local-mode folder that a running memory service holds (Qdrant local allows one process).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from evoskill.platform.config import GrpcSettings, Settings


class MemoryUnavailable(Exception):
    """Neither a running memory service nor the store could be reached."""


@contextlib.asynccontextmanager
async def memory_stub(settings: Settings, say: Callable[[str], None]) -> AsyncIterator[Any]:
    from evoskill.memory.service import SERVICE_NAME, MemoryServicer, open_store
    from evoskill.memory.v1 import memory_pb2_grpc
    from evoskill.platform.rpc import channel, check_health, start_server
    from evoskill.stack.supervisor import running_settings

    settings = running_settings(settings)
    target = settings.endpoint("memory").target
    if await check_health(target, settings=settings.grpc):
        async with channel(target, settings.grpc) as ch:
            yield memory_pb2_grpc.MemoryServiceStub(ch)
        return
    where = settings.qdrant.url or settings.qdrant_path.resolve()
    say(f"no memory service answers on {target}: opening the store ({where}) in this process")
    try:
        store = await asyncio.to_thread(open_store, settings)
    except (RuntimeError, OSError, ValueError) as exc:  # e.g. a local folder another process holds
        raise MemoryUnavailable(f"cannot open the memory store {where}: {exc}") from exc
    loopback = GrpcSettings()  # plain: the server and its one client are this process
    server = await start_server([(memory_pb2_grpc.add_MemoryServiceServicer_to_server,
                                  MemoryServicer(store, settings.memory), SERVICE_NAME)], "127.0.0.1:0", loopback)
    try:
        async with channel(f"127.0.0.1:{server.port}", loopback) as ch:
            yield memory_pb2_grpc.MemoryServiceStub(ch)
    finally:
        server.grace_s = 0.5
        await server.stop()
        await asyncio.to_thread(store.close)
