"""The memory process (seed 004 §2): experience units in Qdrant, Store/Retrieve over gRPC, and the
`reward.scored` -> experience path. It owns the Qdrant client (local mode allows one process per storage
folder); every Qdrant call and embedding runs in a worker thread, off the event loop.

Each step arrives twice: from `reward.scored` as soon as it is scored (its episode's outcome pending), and
from `episode.completed`, which rewrites the episode's steps with the outcome, the episode's score, the
policy version and each step's cost. The subjects are not ordered; the store keeps the complete version, and
the completed episode replaces what an earlier attempt of it (cut short by a crash, retried under the same id)
left pending.

Tiers (seed 004 §5.1, docs/memory.md): a background task compacts old and low-value episodes into the cold
collection every `memory.tiers.every_s`, or after `memory.tiers.after_writes` writes; `Compact` runs one now.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

import grpc

from evoskill.core.errors import InvalidInput
from evoskill.core.memory import (
    Retrieval,
    check_experience,
    experience_from_transition,
    experiences_from_episode,
    weights_for,
)
from evoskill.core.memory.experience import OUTCOMES
from evoskill.core.memory.tiers import Limits
from evoskill.events.v1 import events_pb2
from evoskill.memory.query import filter_conditions
from evoskill.memory.store import ExperienceStore, make_featurizer, open_qdrant
from evoskill.memory.v1 import memory_pb2, memory_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import MemorySettings, MemoryTiersSettings, Settings
from evoskill.platform.rpc import rpc_method
from evoskill.platform.service import ServiceParts

SERVICE_NAME = "evoskill.memory.v1.MemoryService"
log = logging.getLogger(__name__)


def make_query(request: memory_pb2.RetrieveRequest, defaults: MemorySettings) -> Retrieval:
    """The request's retrieval: its profile (memory.profile when unset) with the weights it sets."""
    if request.limit < 0:
        raise InvalidInput(f"limit must be >= 0 (0 = the default), got {request.limit}")
    if request.recall < 0:
        raise InvalidInput(f"recall must be >= 0 (0 = the default), got {request.recall}")
    bad = [o for o in request.outcomes if o not in OUTCOMES]
    if bad:
        raise InvalidInput(f"outcomes holds values that are no Outcome: {bad}")
    weights = weights_for(
        defaults.profiles, request.profile or defaults.profile,
        **{name: getattr(request, f"{name}_weight") if request.HasField(f"{name}_weight") else None
           for name in ("reward", "outcome", "novelty")},
        diversity=request.diversity if request.HasField("diversity") else None,
    )
    return Retrieval(
        goal=request.goal, state=request.state, limit=request.limit or defaults.limit,
        recall=request.recall or defaults.recall, weights=weights, taken_actions=tuple(request.taken_actions),
        env_spec=request.env_spec, env_family=request.env_family, template=request.template,
        outcomes=tuple(OUTCOMES[o] for o in request.outcomes), alternatives=request.alternatives,
        cold_fill=defaults.tiers.cold_fill, seed=request.seed if request.HasField("seed") else None,
    )


def limits_of(tiers: MemoryTiersSettings) -> Limits:
    return Limits(hot_max=tiers.hot_max, max_age_ms=int(tiers.max_age_days * 86_400_000),
                  low_value_below=tiers.low_value_below, min_age_ms=int(tiers.min_age_s * 1000))


async def compact(store: ExperienceStore, tiers: MemoryTiersSettings) -> memory_pb2.CompactReply:
    """One compaction in a worker thread (writes and retrievals go on between its batches)."""
    moved, episodes, reasons = await asyncio.to_thread(store.compact, limits_of(tiers), tiers.batch)
    if moved:
        log.info("compaction: %d experiences of %d episodes summarised into %s (%s)", moved, episodes, store.cold,
                 ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items())))
    return memory_pb2.CompactReply(moved=moved, episodes=episodes, reasons=reasons)


POLL_S = 1.0  # how often the compactor looks at the writes since the last compaction


async def compact_forever(store: ExperienceStore, tiers: MemoryTiersSettings) -> None:
    """The background compactor: every `every_s`, or once `after_writes` experiences were stored since the last
    compaction, whichever comes first. A failed compaction is logged and tried again at the next turn."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(min(POLL_S, tiers.every_s))
        by_writes = tiers.after_writes and store.written >= tiers.after_writes
        if not by_writes and time.monotonic() - last < tiers.every_s:
            continue
        last = time.monotonic()
        try:
            await compact(store, tiers)
        except Exception:  # Qdrant unreachable, a server error: the next turn tries again
            log.exception("compaction failed; trying again in %.0f s", tiers.every_s)


DEFAULT_PAGE = 100
MAX_PAGE = 1000


def page_offset(token: str) -> str | None:
    """A page token is the point id the previous page stopped before (a UUID)."""
    if not token:
        return None
    try:
        return str(uuid.UUID(token))
    except ValueError:
        raise InvalidInput(f"page_token {token!r} is not one a List reply gave") from None


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    def __init__(self, store: ExperienceStore, settings: MemorySettings) -> None:
        self.store = store
        self.settings = settings

    @rpc_method
    async def Store(self, request: memory_pb2.StoreRequest, context: grpc.aio.ServicerContext) -> memory_pb2.StoreReply:
        for i, experience in enumerate(request.experiences):
            check_experience(experience, f"experiences[{i}]")
        stored = await asyncio.to_thread(self.store.store, list(request.experiences))
        return memory_pb2.StoreReply(stored=stored)

    @rpc_method
    async def Retrieve(
        self, request: memory_pb2.RetrieveRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.RetrieveReply:
        query = make_query(request, self.settings)
        return memory_pb2.RetrieveReply(results=await asyncio.to_thread(self.store.retrieve, query))

    @rpc_method
    async def List(self, request: memory_pb2.ListRequest, context: grpc.aio.ServicerContext) -> memory_pb2.ListReply:
        if not 0 <= request.limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be in 0..{MAX_PAGE} (0 = {DEFAULT_PAGE}), got {request.limit}")
        conditions, offset = filter_conditions(request.filter), page_offset(request.page_token)
        units, after, matched = await asyncio.to_thread(self.store.page, conditions, request.limit or DEFAULT_PAGE,
                                                        offset)
        return memory_pb2.ListReply(experiences=units, next_page_token=after, matched=matched)

    @rpc_method
    async def Get(self, request: memory_pb2.GetRequest, context: grpc.aio.ServicerContext) -> memory_pb2.GetReply:
        if not all(request.ids):
            raise InvalidInput("ids holds an empty id")
        return memory_pb2.GetReply(experiences=await asyncio.to_thread(self.store.get, list(request.ids)))

    @rpc_method
    async def Delete(
        self, request: memory_pb2.DeleteRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.DeleteReply:
        conditions = filter_conditions(request.filter)
        if request.all and conditions:
            raise InvalidInput("all deletes every unit: leave the filter empty")
        if not request.all and not conditions:
            raise InvalidInput("the filter is empty: set a field, or all to delete every unit")
        return memory_pb2.DeleteReply(deleted=await asyncio.to_thread(self.store.delete, conditions))

    @rpc_method
    async def Stats(self, request: memory_pb2.StatsRequest, context: grpc.aio.ServicerContext) -> memory_pb2.StatsReply:
        reply = await asyncio.to_thread(self.store.stats)
        reply.limits = json.dumps(self.settings.tiers.model_dump(), sort_keys=True)
        return reply

    @rpc_method
    async def Compact(
        self, request: memory_pb2.CompactRequest, context: grpc.aio.ServicerContext
    ) -> memory_pb2.CompactReply:
        return await compact(self.store, self.settings.tiers)


def open_store(settings: Settings) -> ExperienceStore:
    """The configured collection (blocking). Local mode: fails while another process holds the folder."""
    featurizer = make_featurizer(settings)  # MiniLM: ~0.5 s, or ~9 s on the first start (ONNX export)
    client = open_qdrant(settings)
    try:
        return ExperienceStore(client, settings.qdrant.collection, featurizer, indexed=bool(settings.qdrant.url),
                               cold_collection=settings.qdrant.cold_collection,
                               disk=None if settings.qdrant.url else settings.qdrant_path)
    except BaseException:
        client.close()
        raise


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    store = await asyncio.to_thread(open_store, settings)
    servicer = MemoryServicer(store, settings.memory)

    # Each event is made an experience on its own (InvalidInput: no action, no goal and state, no episode id ->
    # dead letter with the reason); the rest of a pull is written at once, and acked once written.
    size, wait_s = settings.memory.batch_size, settings.memory.batch_wait_s

    def scored(event: events_pb2.RewardScored) -> memory_pb2.Experience:
        return experience_from_transition(event.transition, event.total)

    def episode(event: events_pb2.EpisodeCompleted) -> tuple[str, list[memory_pb2.Experience]]:
        return event.episode_id, experiences_from_episode(event)

    @bus.batch_consumer(Subjects.REWARD_SCORED, events_pb2.RewardScored, scored, size, wait_s)
    async def on_scored(experiences: list[memory_pb2.Experience]) -> None:
        await asyncio.to_thread(store.store, experiences)

    @bus.batch_consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted, episode, size, wait_s)
    async def on_episode(episodes: list[tuple[str, list[memory_pb2.Experience]]]) -> None:
        await asyncio.to_thread(store.store_episodes, episodes)

    async def close() -> None:
        await asyncio.to_thread(store.close)

    async def compactor() -> None:
        await compact_forever(store, settings.memory.tiers)

    return ServiceParts(
        registrations=[(memory_pb2_grpc.add_MemoryServiceServicer_to_server, servicer, SERVICE_NAME)],
        background=[compactor] if settings.memory.tiers.compact else [],
        closers=[close],
    )
