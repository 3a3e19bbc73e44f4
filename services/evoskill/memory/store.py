"""The experience collections in Qdrant: the only code that touches the client (blocking calls; the service
runs them in a worker thread). Local mode under the state folder, or the server named by `qdrant.url`.

Two tiers (core/memory/tiers.py): the hot collection, one point per step, and the cold one, summaries of
episodes compacted out of hot, beside payload-only points recording which episodes went cold (so a late or
redelivered write of one is not stored again) and the compactions' record.

Retrieval is one `query_points` call (memory/query.py: recall under filters, formula re-score), then MMR
over the scored candidates when a retrieval asks for diversity (core/memory/ranking.py says why there).

Vectors are named after the featuriser ("minilm", "hash384"): vectors of different featurisers are not
comparable, so a collection built with one refuses to be searched with another instead of answering nonsense.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
from qdrant_client import QdrantClient, models

from evoskill.core.learn.features import CachedFeaturizer, featurizer_from_spec
from evoskill.core.memory import Retrieval, cosines, from_payload, mmr, point_id, query_text, to_payload
from evoskill.core.memory.tiers import (
    Limits,
    batch_id,
    batches,
    digest_episodes,
    episode_key,
    from_cold_payload,
    ledger_id,
    merge,
    select_cold,
    summarise,
    summary_experience,
    summary_id,
    to_cold_payload,
)
from evoskill.learner.registry import feature_cache_dir
from evoskill.memory.query import COLD_INDEXED_FIELDS, INDEXED_FIELDS, matches, matches_any, prefetch, rescore
from evoskill.memory.v1 import memory_pb2
from evoskill.platform import metrics
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


SUMMARIES = models.Filter(must=[matches("kind", "summary")])
META_ID = point_id("cold-meta")  # the cold collection's record of compactions (payload only)
SCAN_PAGE = 1000
HOT_DIGEST_FIELDS = ["id", "episode_id", "time_unix_ms", "reward_unit", "outcome", "outcome_value"]


GONE_COLD = models.Filter(must=[matches("kind", "episode")])
MOVING = models.Filter(must=[matches("kind", "episode"), matches("state", "moving")])


def dense(point: models.Record | models.ScoredPoint, name: str) -> list[float]:
    """The point's vector `name` (a dense one: the only kind these collections hold); [] when it has none."""
    vectors = point.vector if isinstance(point.vector, dict) else {}
    return cast("list[float]", vectors.get(name) or [])


def of_episodes(keys: Sequence[str]) -> models.Filter:
    """The hot points of these episode keys (core/memory/tiers.py: episode_key)."""
    episode_ids = [k for k in keys if not k.startswith("unit:")]
    unit_ids = [k.removeprefix("unit:") for k in keys if k.startswith("unit:")]
    should: list[models.Condition] = []
    if episode_ids:
        should.append(matches_any("episode_id", episode_ids))
    if unit_ids:
        should.append(models.Filter(must=[matches_any("id", unit_ids), matches("episode_id", "")]))
    return models.Filter(should=should)


def pending_of(*episode_ids: str) -> models.Filter:
    return models.Filter(must=[matches_any("episode_id", list(episode_ids)), matches_any("outcome", ["pending"])])


class ExperienceStore:
    def __init__(
        self, client: QdrantClient, collection: str, featurizer: CachedFeaturizer, *, indexed: bool = False,
        cold_collection: str = "", disk: Path | None = None,
    ) -> None:
        """`indexed`: create payload indexes (a Qdrant server; local mode scans every point and ignores them).
        `cold_collection`: the cold tier's (empty = `<collection>_cold`). `disk`: local mode's folder, for
        the tiers' sizes in `stats`. A compaction a crash cut short is finished here, before any write."""
        self.client = client
        self.indexed = indexed
        self.collection = collection
        self.cold = cold_collection or f"{collection}_cold"
        self.disk = disk
        self.featurizer = featurizer
        self.vector = vector_name(featurizer)
        self.written = 0  # experiences stored since the last compaction (the service compacts after N)
        self.summaries_written = 0  # cold summaries written (new or merged into), for the compaction metrics
        self.closed = False  # a compaction in progress stops at its next batch
        self._lock = threading.Lock()  # local mode's client is not meant for concurrent use
        self._compacting = threading.Lock()  # one compaction at a time
        self._ensure_collection(self.collection, INDEXED_FIELDS)
        self._ensure_collection(self.cold, COLD_INDEXED_FIELDS)
        # Every environment spec the hot collection may hold (a superset: deletions do not shrink it). Where it
        # is one spec, a filter on it passes every point, and local mode, which checks a filter point by point
        # in Python, is spared it (a server's payload index makes it a lookup; it keeps the filter).
        self._specs = set() if indexed else self._stored_specs()
        with self._lock:
            for batch, keys in self._unfinished().items():
                self._move(batch, keys, recorded=True)

    def _ensure_collection(self, name: str, indexed_fields: dict[str, models.PayloadSchemaType]) -> None:
        if self.client.collection_exists(name) and self._empty_and_unnamed(name):
            # Made by a release whose memory service only opened the collection: nothing to keep.
            self.client.delete_collection(name)
        if not self.client.collection_exists(name):
            # Dot product on the unit vectors `_embed` gives is their cosine; local mode's cosine re-normalises
            # every stored vector at every query (docs/results.md, "Dot product on unit vectors").
            # A collection made as COSINE by an earlier release ranks the same unit vectors the same.
            params = models.VectorParams(size=self.featurizer.dim, distance=models.Distance.DOT)
            self.client.create_collection(name, vectors_config={self.vector: params})
            self._ensure_indexes(name, indexed_fields)
            return
        vectors = self.client.get_collection(name).config.params.vectors
        names = sorted(vectors) if isinstance(vectors, dict) else ["<unnamed>"]
        if self.vector not in names:
            raise RuntimeError(
                f"collection {name!r} holds vectors {names}, not {self.vector!r}: it was built with "
                "another featuriser; set memory.featurizer back or qdrant.collection to a new name"
            )
        self._ensure_indexes(name, indexed_fields)

    def _ensure_indexes(self, name: str, indexed_fields: dict[str, models.PayloadSchemaType]) -> None:
        """Payload indexes on the filtered fields, those missing (a collection from an earlier release has
        fewer). Local mode has none to make: it scans every point and warns that indexes do nothing."""
        if not self.indexed:
            return
        existing = self.client.get_collection(name).payload_schema
        for field, schema in indexed_fields.items():
            if field not in existing:
                self.client.create_payload_index(name, field, schema)

    def _stored_specs(self) -> set[str]:
        count = self.client.count(self.collection, exact=True).count
        hits = self.client.facet(self.collection, "env_spec", limit=max(count, 1), exact=True).hits if count else []
        return {str(hit.value) for hit in hits}

    def _empty_and_unnamed(self, name: str) -> bool:
        info = self.client.get_collection(name)
        return not isinstance(info.config.params.vectors, dict) and not info.points_count

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.featurizer.encode(texts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # A text without words hashes to zeros, which cannot be normalised: give it a fixed direction.
        empty = norms[:, 0] == 0
        vectors[empty, 0], norms[empty] = 1.0, 1.0
        return vectors / norms  # unit: DOT scores are cosines

    def _points(self, experiences: Sequence[memory_pb2.Experience]) -> list[models.PointStruct]:
        vectors = self._embed([query_text(e.goal, e.state) for e in experiences])
        if not self.indexed:
            self._specs.update(e.env_spec for e in experiences)
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

    def _gone_cold(self, keys: set[str]) -> set[str]:
        """Those of the episode keys that a compaction moved cold (their ledger points)."""
        if not keys:
            return set()
        found = self.client.retrieve(self.cold, [ledger_id(k) for k in keys], with_payload=["key"], with_vectors=False)
        return {str(p.payload["key"]) for p in found if p.payload}

    def store(self, experiences: Sequence[memory_pb2.Experience]) -> int:
        """Upsert by key; those with a pending outcome only where no known outcome is stored (see above), and
        not at all for an episode stored complete (a late step of an attempt its retry replaced). Nothing of
        an episode gone cold is stored again (it is counted in its summaries): returns how many were taken."""
        if not experiences:
            return 0
        points = self._points(experiences)
        with self._lock:
            cold = self._gone_cold({episode_key(p.payload or {}) for p in points})
            points = [p for p in points if episode_key(p.payload or {}) not in cold]
            known = [p for p in points if (p.payload or {})["outcome"] in KNOWN]
            pending = [p for p in points if (p.payload or {})["outcome"] not in KNOWN]
            if known:
                self.client.upsert(self.collection, points=known)
            keyed = {str(p.payload["episode_id"]) for p in pending if p.payload and p.payload["episode_id"]}
            if keyed and (done := self._completed(keyed)):
                pending = [p for p in pending if (p.payload or {})["episode_id"] not in done]
            if pending:
                self.client.upsert(self.collection, points=pending, update_filter=KNOWN_OUTCOME_KEPT)
            self.written += len(points)
        return len(points)

    def store_episode(self, episode_id: str, experiences: Sequence[memory_pb2.Experience]) -> int:
        """An episode complete, every step with its outcome: it replaces whatever of the episode is stored, so
        the pending steps of an attempt that a crash cut short and a retry did not reach are removed. An
        episode gone cold is not stored again."""
        return self.store_episodes([(episode_id, experiences)])

    def store_episodes(self, episodes: Sequence[tuple[str, Sequence[memory_pb2.Experience]]]) -> int:
        """`store_episode` for many at once: one upsert and one delete for all of them."""
        points = self._points([e for _, experiences in episodes for e in experiences])
        with self._lock:
            cold = self._gone_cold({episode_id for episode_id, _ in episodes})
            kept = [e for e, _ in episodes if e not in cold]
            points = [p for p in points if (p.payload or {})["episode_id"] not in cold]
            if points:  # Qdrant refuses an empty upsert; an episode with no storable step still clears its pending
                self.client.upsert(self.collection, points=points)
            if kept:
                self.client.delete(self.collection, points_selector=models.FilterSelector(filter=pending_of(*kept)))
            self.written += len(points)
        return len(points)

    def retrieve(self, retrieval: Retrieval) -> list[memory_pb2.ScoredExperience]:
        """One query: recall `candidates` by vector under the filters, re-score by the formula; then MMR
        among all the scored candidates when diversity is asked for, else the best `limit` of them. With
        `Retrieval.seed`, this task's own experiences of this very state among the candidates (identical text:
        the first stage's nearest) come first, flagged `own`, at most `limit`: the formula may rank a lost
        attempt here below the won steps of similar states."""
        (vector,) = self._embed([query_text(retrieval.goal, retrieval.state)])
        diversity = retrieval.weights.diversity
        here = retrieval.situation
        with self._lock:
            every_point = not self.indexed and self._specs == {retrieval.env_spec}
            hits = self.client.query_points(
                self.collection, query=rescore(retrieval),
                prefetch=prefetch(retrieval, vector.tolist(), self.vector, spec_filtered=not every_point),
                limit=retrieval.candidates if diversity or here else retrieval.limit,
                with_payload=True, with_vectors=[self.vector],
            ).points
        units = [from_payload(hit.payload or {}) for hit in hits]
        own = [i for i, unit in enumerate(units) if here is not None and here.holds(unit)][:retrieval.limit]
        mine = set(own)
        ranked = [i for i in range(len(hits)) if i not in mine]
        results = []
        if hits:
            vectors = np.array([hit.vector[self.vector] for hit in hits if isinstance(hit.vector, dict)])
            scores = np.array([hit.score for hit in hits])
            similarities = cosines(vector, vectors)
            results = [memory_pb2.ScoredExperience(experience=units[i], score=float(scores[i]),
                                                   similarity=float(similarities[i]), own=True) for i in own]
            results += [
                memory_pb2.ScoredExperience(experience=units[ranked[j]], score=float(scores[ranked[j]]),
                                            similarity=float(similarities[ranked[j]]))
                for j in mmr(scores[ranked], vectors[ranked], diversity, retrieval.limit)
            ]
        if retrieval.cold_fill and len(results) - len(own) < retrieval.limit:
            results += self._retrieve_cold(retrieval, vector, retrieval.limit - len(results) + len(own))
        return results

    def _retrieve_cold(self, retrieval: Retrieval, vector: np.ndarray, limit: int) -> list[memory_pb2.ScoredExperience]:
        """The best `limit` cold summaries by the same query (their payloads carry the same keys), score order."""
        with self._lock:
            hits = self.client.query_points(
                self.cold, prefetch=prefetch(retrieval, vector.tolist(), self.vector), query=rescore(retrieval),
                limit=limit, with_payload=True, with_vectors=[self.vector],
            ).points
        out = []
        for hit in hits:
            summary = from_cold_payload(hit.payload or {})
            (similarity,) = cosines(vector, np.array([dense(hit, self.vector)]))
            out.append(memory_pb2.ScoredExperience(experience=summary_experience(summary), score=float(hit.score),
                                                   similarity=float(similarity), cold=True, summarised=summary.count))
        return out

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
        """Delete the hot units matching every condition; no condition: all of them and the whole cold tier
        too (its summaries, which episodes went cold, the compactions' record). Returns the hot ones deleted."""
        where = models.Filter(must=conditions)
        with self._lock:
            doomed = int(self.client.count(self.collection, count_filter=where, exact=True).count)
            if doomed:
                self.client.delete(self.collection, points_selector=models.FilterSelector(filter=where))
            if not conditions:
                self.client.delete(self.cold, points_selector=models.FilterSelector(filter=models.Filter()))
        return doomed

    # -- tiers ---------------------------------------------------------------------------------------------

    def _scroll(self, collection: str, where: models.Filter | None, payload: bool | list[str],
                vectors: bool | list[str] = False) -> list[models.Record]:
        records: list[models.Record] = []
        offset = None
        while True:
            page, offset = self.client.scroll(collection, scroll_filter=where, limit=SCAN_PAGE, offset=offset,
                                              with_payload=payload, with_vectors=vectors)
            records += page
            if offset is None:
                return records

    def _unfinished(self) -> dict[str, list[str]]:
        """Batches a compaction recorded as moving and did not finish (it crashed): their episode keys."""
        out: dict[str, list[str]] = {}
        for point in self._scroll(self.cold, MOVING, ["key", "batch"]):
            payload = point.payload or {}
            out.setdefault(str(payload["batch"]), []).append(str(payload["key"]))
        return {batch: sorted(keys) for batch, keys in sorted(out.items())}

    def _move(self, batch: str, keys: Sequence[str], recorded: bool = False) -> int:
        """Move these episodes cold, in four steps, each safe to redo after a crash: (1) record them as
        moving in the cold collection (from then on no write of theirs is taken, so their hot points stay
        as they are); (2) merge their summaries into those stored, skipping a summary that holds the batch
        already; (3) drop their points from hot; (4) record them as cold. Returns the experiences moved."""
        ledger = [ledger_id(k) for k in keys]
        if not recorded:
            now_ms = int(time.time() * 1000)
            self.client.upsert(self.cold, points=[
                models.PointStruct(id=ledger_id(k), vector={}, payload={
                    "kind": "episode", "key": k, "batch": batch, "state": "moving", "moved_unix_ms": now_ms})
                for k in keys])
        where = of_episodes(keys)
        members = self._scroll(self.collection, where, True, [self.vector])
        if members:
            self._merge_summaries(batch, [(p.payload or {}, dense(p, self.vector)) for p in members])
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=where))
        self.client.set_payload(self.cold, payload={"state": "cold"}, points=models.PointIdsList(points=ledger))
        return len(members)

    def _merge_summaries(self, batch: str, members: Sequence[tuple[dict[str, Any], Sequence[float]]]) -> None:
        fresh = summarise(members, batch)
        stored = {str(p.id): p for p in self.client.retrieve(self.cold, [summary_id(k) for k in fresh],
                                                             with_payload=True, with_vectors=[self.vector])}
        points = []
        for key, summary in fresh.items():
            old = stored.get(summary_id(key))
            if old is not None:
                before = from_cold_payload(old.payload or {}, dense(old, self.vector))
                if batch in before.batches:
                    continue  # merged before a crash cut the batch short
                summary = merge(before, summary)
            points.append(models.PointStruct(id=summary_id(key), payload=to_cold_payload(summary),
                                             vector={self.vector: list(summary.representative.vector)}))
        if points:
            self.client.upsert(self.cold, points=points)
            self.summaries_written += len(points)

    def compact(self, limits: Limits, batch: int, now_ms: int | None = None) -> tuple[int, int, dict[str, int]]:
        """Move the episodes the limits send cold (core/memory/tiers.py: select_cold), `batch` experiences at a
        time (`_move`: a crash leaves a batch to be finished, never redone). Returns (experiences moved,
        episodes moved, episodes per reason)."""
        with self._compacting:
            summaries = self.summaries_written
            try:
                moved, episodes, reasons = self._compact(limits, batch, now_ms)
            except Exception:
                metrics.record_compaction(metrics.FAILED)
                raise
            metrics.record_compaction(metrics.OK, moved, reasons, self.summaries_written - summaries)
        return moved, episodes, reasons

    def _compact(self, limits: Limits, batch: int, now_ms: int | None) -> tuple[int, int, dict[str, int]]:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        moved = episodes = 0
        reasons: dict[str, int] = {}
        with self._lock:
            self.written = 0
            for leftover, keys in self._unfinished().items():
                moved += self._move(leftover, keys, recorded=True)
            digests = digest_episodes(p.payload or {} for p in self._scroll(self.collection, None,
                                                                             HOT_DIGEST_FIELDS))
        chosen = select_cold(digests, now_ms, limits)
        for _, reason in chosen:
            reasons[reason] = reasons.get(reason, 0) + 1
        sizes = {d.key: d.size for d in digests}
        for keys in batches(chosen, sizes, batch):
            with self._lock:  # a batch at a time: writes and retrievals go on between batches
                if self.closed:
                    break
                moved += self._move(batch_id(keys), keys)
            episodes += len(keys)
        if moved:
            with self._lock:
                if not self.closed:
                    self._record_compaction(now_ms, moved)
        return moved, episodes, reasons

    def _meta(self) -> dict[str, Any]:
        """The compactions' record (empty before the first)."""
        found = self.client.retrieve(self.cold, [META_ID], with_payload=True)
        return (found[0].payload or {}) if found else {}

    def _record_compaction(self, now_ms: int, moved: int) -> None:
        runs = int(self._meta().get("compactions", 0))
        self.client.upsert(self.cold, points=[models.PointStruct(id=META_ID, vector={}, payload={
            "kind": "meta", "compactions": runs + 1, "last_compaction_unix_ms": now_ms, "last_moved": moved})])

    def _time_range(self, collection: str, where: models.Filter | None, first: str, last: str) -> tuple[int, int]:
        def end(key: str, direction: models.Direction) -> int:
            (points, _) = self.client.scroll(collection, scroll_filter=where, limit=1, with_payload=[key],
                                             order_by=models.OrderBy(key=key, direction=direction))
            return int((points[0].payload or {}).get(key, 0)) if points else 0

        return end(first, models.Direction.ASC), end(last, models.Direction.DESC)

    def _bytes(self, collection: str) -> int:
        """On disk, in local mode (its folder per collection); 0 on a server (not known cheaply)."""
        if self.disk is None:
            return 0
        folder = self.disk / "collection" / collection
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0

    def stats(self) -> memory_pb2.StatsReply:
        """Both tiers: sizes, time spans, bytes on disk (local mode), what the summaries stand for, the last
        compaction."""
        with self._lock:
            hot_points = int(self.client.count(self.collection, exact=True).count)
            hot_span = self._time_range(self.collection, None, "time_unix_ms", "time_unix_ms")
            summaries = self._scroll(self.cold, SUMMARIES, ["count"])
            episodes = int(self.client.count(self.cold, count_filter=GONE_COLD, exact=True).count)
            cold_span = self._time_range(self.cold, SUMMARIES, "first_unix_ms", "time_unix_ms")
            record = self._meta()
        return memory_pb2.StatsReply(
            hot=memory_pb2.TierStats(collection=self.collection, points=hot_points, oldest_unix_ms=hot_span[0],
                                     newest_unix_ms=hot_span[1], bytes=self._bytes(self.collection)),
            cold=memory_pb2.TierStats(collection=self.cold, points=len(summaries), oldest_unix_ms=cold_span[0],
                                      newest_unix_ms=cold_span[1], bytes=self._bytes(self.cold)),
            summarised=sum(int((p.payload or {}).get("count", 0)) for p in summaries),
            summarised_episodes=episodes,
            compactions=int(record.get("compactions", 0)),
            last_compaction_unix_ms=int(record.get("last_compaction_unix_ms", 0)),
            last_moved=int(record.get("last_moved", 0)),
        )

    def count(self) -> int:
        with self._lock:
            return int(self.client.count(self.collection).count)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self.client.close()
