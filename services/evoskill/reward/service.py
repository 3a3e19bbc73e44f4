"""The reward service process (gRPC health only until its API lands; see the issues)."""

from __future__ import annotations

from evoskill.platform.bus import Bus
from evoskill.platform.config import Settings
from evoskill.platform.service import ServiceParts


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    return ServiceParts()
