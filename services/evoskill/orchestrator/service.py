"""The orchestrator process: a Temporal worker for evoskill's workflows (see worker.py), plus gRPC health."""

from __future__ import annotations

from evoskill.orchestrator.worker import worker
from evoskill.platform.bus import Bus
from evoskill.platform.config import Settings
from evoskill.platform.service import ServiceParts
from evoskill.platform.temporal import connect


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    running = worker(await connect(settings), settings)

    async def run_worker() -> None:
        await running.run()

    async def shutdown() -> None:
        await running.shutdown()

    return ServiceParts(background=[run_worker], closers=[shutdown])
