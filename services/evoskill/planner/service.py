"""The planner process: plays episodes with MCTS over sandbox sessions, publishes what it found."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc

from evoskill.common.v1 import common_pb2
from evoskill.core.agent import EpisodeMemory, Step
from evoskill.core.errors import InvalidInput
from evoskill.core.reward import Scorer
from evoskill.core.search.advice import PolicyFn
from evoskill.events.v1 import events_pb2
from evoskill.memory.v1 import memory_pb2_grpc
from evoskill.planner import llm
from evoskill.planner.agents import AgentTools, agent_kind, build_agent
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.policy import OnnxPolicyFn, PolicyStore
from evoskill.planner.search_io import resolve_config
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.replicas import ReplicaStub
from evoskill.platform.rpc import abort_for, rpc_method, sync_channel
from evoskill.platform.service import ServiceParts
from evoskill.reward.v1 import reward_pb2_grpc
from evoskill.sandbox.v1 import sandbox_pb2_grpc

SERVICE_NAME = "evoskill.planner.v1.PlannerService"
_DONE = object()
log = logging.getLogger(__name__)


class PlannerServicer(planner_pb2_grpc.PlannerServiceServicer):
    def __init__(self, settings: Settings, bus: Bus | None) -> None:
        self.settings = settings
        self.bus = bus
        # A session's calls dial the sandbox replica holding it; new sessions and other calls go in turn.
        self.sandbox = self._replicas("sandbox", sandbox_pb2_grpc.SandboxServiceStub, owns_sessions=True)
        self.reward = self._replicas("reward", reward_pb2_grpc.RewardServiceStub)
        self.score = Scorer.for_settings(settings)  # search scores its steps and rollouts in-process
        self.memory = self._replicas("memory", memory_pb2_grpc.MemoryServiceStub)
        self.policies = PolicyStore(settings)
        self.llm = llm.from_settings(settings)  # None unless llm.base_url is set

    def _replicas(self, service: str, stub: Any, owns_sessions: bool = False) -> ReplicaStub:
        return ReplicaStub(service, self.settings.endpoint(service), stub,
                           lambda address: sync_channel(address, self.settings.grpc), owns_sessions)

    def player(self, policy: PolicyFn | None = None, shadow_policy: PolicyFn | None = None) -> EpisodePlayer:
        return EpisodePlayer(self.sandbox, self.reward, self.settings.search, self.score, policy,
                             memory=self.memory, llm=self.llm, shadow_policy=shadow_policy)

    async def serving_policy(self, config: planner_pb2.SearchConfig, version: str | None = None) -> OnnxPolicyFn | None:
        """θ at `version` (default `config.policy_version`; empty = the serving one) for the agents that play
        with θ, else None."""
        if not agent_kind(config).uses_policy:
            return None
        return await asyncio.to_thread(self.policies.get, config.policy_version if version is None else version)

    async def PlayEpisode(self, request: planner_pb2.PlayEpisodeRequest,
                          context: grpc.aio.ServicerContext) -> AsyncIterator[planner_pb2.EpisodeUpdate]:
        try:
            policy = await self.serving_policy(request.config)
            shadow = (await self.serving_policy(request.config, request.shadow_policy_version)
                      if request.shadow_policy_version else None)
        except Exception as exc:
            await abort_for(context, exc, "PlayEpisode")
        served = planner_pb2.PlayEpisodeRequest()
        served.CopyFrom(request)
        served.config.policy_version = policy.version if policy else ""  # recorded in EpisodeCompleted
        request = served
        player = self.player(policy, shadow)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        stop = player.stop  # set when the call ends, however: the episode stops before its next search round

        def produce() -> None:
            try:
                for update in player.play(request):
                    loop.call_soon_threadsafe(queue.put_nowait, update)
                    if stop.is_set():
                        return
            except Exception as exc:
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, _DONE)

        context_copy = contextvars.copy_context()  # the caller's trace continues in the thread
        thread = threading.Thread(target=context_copy.run, args=(produce,), daemon=True, name="episode")
        thread.start()
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, Exception):
                    await abort_for(context, item, "PlayEpisode")
                yield item
        finally:
            stop.set()
        if self.bus is not None and player.completed.steps:
            for stats in player.stats:
                await self.bus.publish(Subjects.SEARCH_STATS, stats)
            await self.bus.publish(Subjects.EPISODE_COMPLETED, player.completed)

    @rpc_method
    async def Search(self, request: planner_pb2.SearchRequest,
                     context: grpc.aio.ServicerContext) -> planner_pb2.SearchReply:
        """One search from the session's state as the request's agent searches (mcts, policy+mcts), outside any
        episode: no episode memory, no retrieved memories or LLM advice."""
        if not request.session_id:
            raise InvalidInput("session_id is empty")
        if not agent_kind(request.config).searches:
            raise InvalidInput(f"Search runs a search: agent {request.config.agent!r} does not search "
                               "(mcts, policy+mcts do)")
        resolve_config(request.config, self.settings.search, request.config.seed)  # bad settings: bad input
        policy = await self.serving_policy(request.config)
        tools = AgentTools(self.sandbox, self.settings.search, self.score)
        agent = build_agent(tools, planner_pb2.PlayEpisodeRequest(config=request.config), policy)
        step = Step(request.session_id, common_pb2.Observation(), 0, request.config.seed, EpisodeMemory())

        def run() -> planner_pb2.SearchReply:
            decision = agent.act(step)
            assert decision is not None and decision.search is not None  # a searching agent's
            return decision.search

        try:
            return await asyncio.to_thread(run)
        finally:
            tools.stop.set()  # a cancelled or expired call: its search stops before its next round


def policy_consumer(settings: Settings) -> str:
    """A durable name per planner instance (host and port), stable across its restarts."""
    name = f"planner-{socket.gethostname()}-{settings.endpoint('planner').port}-policy-published"
    return re.sub(r"[^A-Za-z0-9_-]", "-", name)


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    from evoskill.core.search.mcts import warm_up

    await asyncio.to_thread(warm_up)  # compile (or load) the search kernels before serving
    servicer = PlannerServicer(settings, bus)

    # Every planner replica must hear every announcement, so each has its own durable consumer.
    @bus.consumer(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished, durable=policy_consumer(settings),
                  per_replica=True)
    async def on_policy(event: events_pb2.PolicyPublished) -> None:
        if await asyncio.to_thread(servicer.policies.published, event.version):  # bad version -> dead letter
            log.info("planner: now serving policy %s as latest", servicer.policies.latest)
    servicer.policies.follow_serving(bus, durable=policy_consumer(settings).replace("published", "serving"))

    async def close_llm() -> None:
        if servicer.llm is not None:
            await asyncio.to_thread(servicer.llm.close)

    return ServiceParts(registrations=[(planner_pb2_grpc.add_PlannerServiceServicer_to_server, servicer,
                                        SERVICE_NAME)], closers=[close_llm])


__all__ = ["SERVICE_NAME", "PlannerServicer", "create"]
