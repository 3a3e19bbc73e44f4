"""The memory process. Today it owns the experience collection in Qdrant (local mode on disk under the
state folder, or the server named by `qdrant.url`) and serves gRPC health; the Store/Retrieve API and
the event consumers arrive with the memory issue."""

from __future__ import annotations

import asyncio

from qdrant_client import QdrantClient
from qdrant_client.models import Distance, VectorParams

from evoskill.platform.bus import Bus
from evoskill.platform.config import Settings
from evoskill.platform.service import ServiceParts

EMBEDDING_DIM = 384  # all-MiniLM-L6-v2


def open_qdrant(settings: Settings) -> QdrantClient:
    """One process per local storage path: only the memory service opens it."""
    if settings.qdrant.url:
        return QdrantClient(url=settings.qdrant.url, api_key=settings.qdrant.api_key or None)
    settings.qdrant_path.mkdir(parents=True, exist_ok=True)
    return QdrantClient(path=str(settings.qdrant_path))


def ensure_collection(client: QdrantClient, name: str) -> None:
    if not client.collection_exists(name):
        client.create_collection(name, vectors_config=VectorParams(size=EMBEDDING_DIM, distance=Distance.COSINE))


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    client = await asyncio.to_thread(open_qdrant, settings)
    await asyncio.to_thread(ensure_collection, client, settings.qdrant.collection)

    async def close() -> None:
        client.close()

    return ServiceParts(closers=[close])
