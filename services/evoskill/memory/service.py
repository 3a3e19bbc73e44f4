"""The memory process (seed 004 §2): experience units in Qdrant, Store/Retrieve over gRPC, and the
`reward.scored` -> experience path. It owns the Qdrant client (local mode allows one process per storage
folder); every Qdrant call and embedding runs in a worker thread, off the event loop.

`episode.completed` records the episode's outcome: steps already stored are marked, and the outcome is
remembered for steps whose `reward.scored` arrives later (the two subjects are not ordered).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

import grpc

from evoskill.core.errors import InvalidInput
from evoskill.core.memory import check_experience, experience_from_transition
from evoskill.events.v1 import events_pb2
from evoskill.memory.store import ExperienceStore, Query, make_featurizer, open_qdrant
from evoskill.memory.v1 import memory_pb2, memory_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import MemorySettings, Settings
from evoskill.platform.rpc import rpc_method
from evoskill.platform.service import ServiceParts

SERVICE_NAME = "evoskill.memory.v1.MemoryService"


def make_query(request: memory_pb2.RetrieveRequest, defaults: MemorySettings) -> Query:
    if not request.goal and not request.state:
        raise InvalidInput("goal and state are both empty: nothing to retrieve by")
    if request.limit < 0:
        raise InvalidInput(f"limit must be >= 0 (0 = the default), got {request.limit}")
    if request.recall < 0:
        raise InvalidInput(f"recall must be >= 0 (0 = the default), got {request.recall}")
    if not 0.0 <= request.diversity <= 1.0:
        raise InvalidInput(f"diversity must be in [0, 1], got {request.diversity}")
    return Query(
        goal=request.goal, state=request.state, limit=request.limit or defaults.limit,
        recall=request.recall or defaults.recall, reward_weight=request.reward_weight,
        diversity=request.diversity, env_spec=request.env_spec,
    )


class EpisodeOutcomes:
    """Outcomes of recent episodes, for steps whose score arrives after the episode ended."""

    def __init__(self, maxsize: int = 10_000) -> None:
        self.maxsize = maxsize
        self._won: OrderedDict[str, bool] = OrderedDict()

    def record(self, episode_id: str, won: bool) -> None:
        self._won[episode_id] = won
        self._won.move_to_end(episode_id)
        while len(self._won) > self.maxsize:
            self._won.popitem(last=False)

    def get(self, episode_id: str) -> bool | None:
        return self._won.get(episode_id)


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


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    def open_store() -> ExperienceStore:
        featurizer = make_featurizer(settings)  # MiniLM: ~0.5 s, or ~9 s on the first start (ONNX export)
        client = open_qdrant(settings)
        try:
            return ExperienceStore(client, settings.qdrant.collection, featurizer, indexed=bool(settings.qdrant.url))
        except BaseException:
            client.close()
            raise

    store = await asyncio.to_thread(open_store)
    servicer = MemoryServicer(store, settings.memory)
    outcomes = EpisodeOutcomes()

    @bus.consumer(Subjects.REWARD_SCORED, events_pb2.RewardScored)
    async def on_scored(event: events_pb2.RewardScored) -> None:
        # InvalidInput (no action, no goal and state) -> dead letter with the reason.
        experience = experience_from_transition(event.transition, event.total,
                                                outcomes.get(event.transition.episode_id))
        await asyncio.to_thread(store.store, [experience])

    @bus.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
    async def on_episode(event: events_pb2.EpisodeCompleted) -> None:
        if not event.episode_id:
            raise InvalidInput("episode_id is empty")
        outcomes.record(event.episode_id, event.won)
        await asyncio.to_thread(store.mark_episode, event.episode_id, event.won)

    async def close() -> None:
        await asyncio.to_thread(store.close)

    return ServiceParts(
        registrations=[(memory_pb2_grpc.add_MemoryServiceServicer_to_server, servicer, SERVICE_NAME)],
        closers=[close],
    )
