"""The experience collection in Qdrant: the only code that touches the client (blocking calls; the service
runs them in a worker thread). Local mode under the state folder, or the server named by `qdrant.url`.

Retrieval is one `query_points` call (memory/query.py: recall under filters, formula re-score), then MMR
over the scored candidates when a retrieval asks for diversity (core/memory/ranking.py says why there).

Vectors are named after the featuriser ("minilm", "hash384"): vectors of different featurisers are not
comparable, so a collection built with one refuses to be searched with another instead of answering nonsense.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
from qdrant_client import QdrantClient, models

from evoskill.core.learn.features import CachedFeaturizer, featurizer_from_spec
from evoskill.core.memory import Retrieval, cosines, from_payload, mmr, point_id, query_text, to_payload
from evoskill.learner.registry import feature_cache_dir
from evoskill.memory.query import INDEXED_FIELDS, matches_any, prefetch, rescore
from evoskill.memory.v1 import memory_pb2
from evoskill.platform.config import Settings


def open_qdrant(settings: Settings) -> QdrantClient:
    """One process per local storage path: only the memory service opens it."""
    if settings.qdrant.url:
        return QdrantClient(url=settings.qdrant.url, api_key=settings.qdrant.api_key.get_secret_value() or None)
    settings.qdrant_path.mkdir(parents=True, exist_ok=True)
    return QdrantClient(path=str(settings.qdrant_path))


def make_featurizer(settings: Settings) -> CachedFeaturizer:
    memory = settings.memory
    spec = {"kind": "minilm"} if memory.featurizer == "minilm" else {"kind": "hash", "dim": memory.hash_dim}
    return featurizer_from_spec(spec, cache_dir=feature_cache_dir(settings.state_dir), cache_size=20_000)


def vector_name(featurizer: CachedFeaturizer) -> str:
    spec = featurizer.spec
    return "minilm" if spec["kind"] == "minilm" else f"hash{spec['dim']}"


# A write whose outcome is pending never replaces one whose outcome is known: a step scored after its
# episode completed (the subjects are not ordered), or redelivered, keeps the complete version.
KNOWN_OUTCOME_KEPT = models.Filter(must_not=[matches_any("outcome", ["won", "lost"])])
KNOWN = ("won", "lost")


def pending_of(episode_id: str) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key="episode_id", match=models.MatchValue(value=episode_id)),
                               matches_any("outcome", ["pending"])])


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
            self._ensure_indexes()
            return
        vectors = self.client.get_collection(self.collection).config.params.vectors
        names = sorted(vectors) if isinstance(vectors, dict) else ["<unnamed>"]
        if self.vector not in names:
            raise RuntimeError(
                f"collection {self.collection!r} holds vectors {names}, not {self.vector!r}: it was built with "
                "another featuriser; set memory.featurizer back or qdrant.collection to a new name"
            )
        self._ensure_indexes()

    def _ensure_indexes(self) -> None:
        """Payload indexes on the filtered fields, those missing (a collection from an earlier release has
        fewer). Local mode has none to make: it scans every point and warns that indexes do nothing."""
        if not self.indexed:
            return
        existing = self.client.get_collection(self.collection).payload_schema
        for name, schema in INDEXED_FIELDS.items():
            if name not in existing:
                self.client.create_payload_index(self.collection, name, schema)

    def _empty_and_unnamed(self) -> bool:
        info = self.client.get_collection(self.collection)
        return not isinstance(info.config.params.vectors, dict) and not info.points_count

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.featurizer.encode(texts)
        # A text without words hashes to zeros, which cosine cannot normalise: give it a fixed direction.
        vectors[np.linalg.norm(vectors, axis=1) == 0, 0] = 1.0
        return vectors

    def _points(self, experiences: Sequence[memory_pb2.Experience]) -> list[models.PointStruct]:
        vectors = self._embed([query_text(e.goal, e.state) for e in experiences])
        now_ms = int(time.time() * 1000)
        points = []
        for experience, vector in zip(experiences, vectors, strict=True):
            payload = to_payload(experience)
            payload["time_unix_ms"] = payload["time_unix_ms"] or now_ms
            points.append(models.PointStruct(id=point_id(payload["id"]), vector={self.vector: vector.tolist()},
                                             payload=payload))
        return points

    def _completed(self, episode_ids: set[str]) -> set[str]:
        """Those of `episode_ids` stored complete (`store_episode`): their first step has a known outcome."""
        firsts = self.client.retrieve(self.collection, [point_id(f"{e}/0") for e in episode_ids],
                                      with_payload=["episode_id", "outcome"], with_vectors=False)
        return {str(p.payload["episode_id"]) for p in firsts if p.payload and p.payload.get("outcome") in KNOWN}

    def store(self, experiences: Sequence[memory_pb2.Experience]) -> int:
        """Upsert by key; those with a pending outcome only where no known outcome is stored (see above), and
        not at all for an episode stored complete (a late step of an attempt its retry replaced)."""
        if not experiences:
            return 0
        points = self._points(experiences)
        known = [p for p in points if (p.payload or {})["outcome"] in KNOWN]
        pending = [p for p in points if (p.payload or {})["outcome"] not in KNOWN]
        with self._lock:
            if known:
                self.client.upsert(self.collection, points=known)
            keyed = {str(p.payload["episode_id"]) for p in pending if p.payload and p.payload["episode_id"]}
            if keyed and (done := self._completed(keyed)):
                pending = [p for p in pending if (p.payload or {})["episode_id"] not in done]
            if pending:
                self.client.upsert(self.collection, points=pending, update_filter=KNOWN_OUTCOME_KEPT)
        return len(experiences)

    def store_episode(self, episode_id: str, experiences: Sequence[memory_pb2.Experience]) -> int:
        """An episode complete, every step with its outcome: it replaces whatever of the episode is stored, so
        the pending steps of an attempt that a crash cut short and a retry did not reach are removed."""
        points = self._points(experiences)
        with self._lock:
            if points:  # Qdrant refuses an empty upsert; an episode with no storable step still clears its pending
                self.client.upsert(self.collection, points=points)
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=pending_of(episode_id)))
        return len(points)

    def retrieve(self, retrieval: Retrieval) -> list[memory_pb2.ScoredExperience]:
        """One query: recall `candidates` by vector under the filters, re-score by the formula; then MMR
        among all the scored candidates when diversity is asked for, else the best `limit` of them."""
        (vector,) = self._embed([query_text(retrieval.goal, retrieval.state)])
        diversity = retrieval.weights.diversity
        with self._lock:
            hits = self.client.query_points(
                self.collection, prefetch=prefetch(retrieval, vector.tolist(), self.vector),
                query=rescore(retrieval), limit=retrieval.candidates if diversity else retrieval.limit,
                with_payload=True, with_vectors=[self.vector],
            ).points
        if not hits:
            return []
        vectors = np.array([hit.vector[self.vector] for hit in hits if isinstance(hit.vector, dict)])
        scores = np.array([hit.score for hit in hits])
        similarities = cosines(vector, vectors)
        return [
            memory_pb2.ScoredExperience(experience=from_payload(hits[i].payload or {}), score=float(scores[i]),
                                        similarity=float(similarities[i]))
            for i in mmr(scores, vectors, diversity, retrieval.limit)
        ]

    def page(self, conditions: list[models.Condition], limit: int,
             offset: str | None) -> tuple[list[memory_pb2.Experience], str, int]:
        """A page of the units matching every condition, in point-id order: (units, next offset or "", how
        many match in all)."""
        where = models.Filter(must=conditions) if conditions else None
        with self._lock:
            points, after = self.client.scroll(self.collection, scroll_filter=where, limit=limit, offset=offset,
                                               with_payload=True, with_vectors=False)
            matched = self.client.count(self.collection, count_filter=where, exact=True).count
        return [from_payload(p.payload or {}) for p in points], "" if after is None else str(after), int(matched)

    def get(self, keys: Sequence[str]) -> list[memory_pb2.Experience]:
        """The units stored under these keys, in their order; missing ones left out."""
        ids = [point_id(key) for key in keys]
        with self._lock:
            points = self.client.retrieve(self.collection, ids, with_payload=True, with_vectors=False)
        found = {str(p.id): p.payload or {} for p in points}
        return [from_payload(found[i]) for i in ids if i in found]

    def delete(self, conditions: list[models.Condition]) -> int:
        """Delete the units matching every condition (no condition: all of them); returns how many."""
        where = models.Filter(must=conditions)
        with self._lock:
            doomed = int(self.client.count(self.collection, count_filter=where, exact=True).count)
            if doomed:
                self.client.delete(self.collection, points_selector=models.FilterSelector(filter=where))
        return doomed

    def count(self) -> int:
        with self._lock:
            return int(self.client.count(self.collection).count)

    def close(self) -> None:
        with self._lock:
            self.client.close()
