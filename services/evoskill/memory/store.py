"""The experience collection in Qdrant: the only code that touches the client (blocking calls; the service
runs them in a worker thread). Local mode under the state folder, or the server named by `qdrant.url`.

Vectors are named after the featuriser ("minilm", "hash384"): vectors of different featurisers are not
comparable, so a collection built with one refuses to be searched with another instead of answering nonsense.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from qdrant_client import QdrantClient, models

from evoskill.core.learn.features import CachedFeaturizer, featurizer_from_spec
from evoskill.core.memory import from_payload, point_id, query_text, rank, to_payload
from evoskill.learner.registry import feature_cache_dir
from evoskill.memory.v1 import memory_pb2
from evoskill.platform.config import Settings


def open_qdrant(settings: Settings) -> QdrantClient:
    """One process per local storage path: only the memory service opens it."""
    if settings.qdrant.url:
        return QdrantClient(url=settings.qdrant.url, api_key=settings.qdrant.api_key or None)
    settings.qdrant_path.mkdir(parents=True, exist_ok=True)
    return QdrantClient(path=str(settings.qdrant_path))


def make_featurizer(settings: Settings) -> CachedFeaturizer:
    memory = settings.memory
    spec = {"kind": "minilm"} if memory.featurizer == "minilm" else {"kind": "hash", "dim": memory.hash_dim}
    return featurizer_from_spec(spec, cache_dir=feature_cache_dir(settings.state_dir), cache_size=20_000)


def vector_name(featurizer: CachedFeaturizer) -> str:
    spec = featurizer.spec
    return "minilm" if spec["kind"] == "minilm" else f"hash{spec['dim']}"


@dataclass(frozen=True)
class Query:
    goal: str
    state: str
    limit: int
    recall: int
    reward_weight: float = 0.0
    diversity: float = 0.0
    env_spec: str = ""


class ExperienceStore:
    def __init__(
        self, client: QdrantClient, collection: str, featurizer: CachedFeaturizer, *, indexed: bool = False
    ) -> None:
        """`indexed`: create payload indexes (a Qdrant server; local mode scans every point and ignores them)."""
        self.client = client
        self.indexed = indexed
        self.collection = collection
        self.featurizer = featurizer
        self.vector = vector_name(featurizer)
        self._lock = threading.Lock()  # local mode's client is not meant for concurrent use
        self._ensure_collection()

    def _ensure_collection(self) -> None:
        if self.client.collection_exists(self.collection) and self._empty_and_unnamed():
            # Made by a release whose memory service only opened the collection: nothing to keep.
            self.client.delete_collection(self.collection)
        if not self.client.collection_exists(self.collection):
            params = models.VectorParams(size=self.featurizer.dim, distance=models.Distance.COSINE)
            self.client.create_collection(self.collection, vectors_config={self.vector: params})
            if not self.indexed:
                return
            self.client.create_payload_index(self.collection, "env_spec", models.PayloadSchemaType.KEYWORD)
            self.client.create_payload_index(self.collection, "episode_id", models.PayloadSchemaType.KEYWORD)
            return
        vectors = self.client.get_collection(self.collection).config.params.vectors
        names = sorted(vectors) if isinstance(vectors, dict) else ["<unnamed>"]
        if self.vector not in names:
            raise RuntimeError(
                f"collection {self.collection!r} holds vectors {names}, not {self.vector!r}: it was built with "
                "another featuriser; set memory.featurizer back or qdrant.collection to a new name"
            )

    def _empty_and_unnamed(self) -> bool:
        info = self.client.get_collection(self.collection)
        return not isinstance(info.config.params.vectors, dict) and not info.points_count

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.featurizer.encode(texts)
        # A text without words hashes to zeros, which cosine cannot normalise: give it a fixed direction.
        vectors[np.linalg.norm(vectors, axis=1) == 0, 0] = 1.0
        return vectors

    def store(self, experiences: Sequence[memory_pb2.Experience]) -> int:
        if not experiences:
            return 0
        vectors = self._embed([query_text(e.goal, e.state) for e in experiences])
        points = []
        for experience, vector in zip(experiences, vectors, strict=True):
            payload = to_payload(experience)
            points.append(models.PointStruct(id=point_id(payload["id"]), vector={self.vector: vector.tolist()},
                                             payload=payload))
        with self._lock:
            self.client.upsert(self.collection, points=points)
        return len(points)

    def mark_episode(self, episode_id: str, success: bool) -> None:
        """Record the episode's outcome on the steps already stored."""
        selector = models.Filter(must=[models.FieldCondition(key="episode_id",
                                                             match=models.MatchValue(value=episode_id))])
        with self._lock:
            self.client.set_payload(self.collection, payload={"success": success}, points=selector)

    def retrieve(self, query: Query) -> list[memory_pb2.ScoredExperience]:
        (vector,) = self._embed([query_text(query.goal, query.state)])
        where = None
        if query.env_spec:
            where = models.Filter(must=[models.FieldCondition(key="env_spec",
                                                              match=models.MatchValue(value=query.env_spec))])
        with self._lock:
            hits = self.client.query_points(
                self.collection, query=vector.tolist(), using=self.vector, query_filter=where,
                limit=max(query.recall, query.limit), with_payload=True, with_vectors=[self.vector],
            ).points
        if not hits:
            return []
        candidate_vectors = np.array([hit.vector[self.vector] for hit in hits if isinstance(hit.vector, dict)])
        ranked = rank(
            [hit.score for hit in hits], [float((hit.payload or {}).get("reward", 0.0)) for hit in hits],
            candidate_vectors, reward_weight=query.reward_weight, diversity=query.diversity, limit=query.limit,
        )
        return [
            memory_pb2.ScoredExperience(experience=from_payload(hits[r.index].payload or {}), score=r.relevance,
                                        similarity=r.similarity)
            for r in ranked
        ]

    def count(self) -> int:
        with self._lock:
            return int(self.client.count(self.collection).count)

    def close(self) -> None:
        with self._lock:
            self.client.close()
