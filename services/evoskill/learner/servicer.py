"""LearnerService over gRPC: Train (in a worker thread, one at a time), GetPolicy, ListPolicies, SetServing,
and the offline library's ImportEpisodes / ExportEpisodes.

Train is idempotent by `request_id`: the id is recorded with the version it published, and a repeat (an
activity retried after its worker died once the learner had published) gets that version back, untrained.
A Train whose caller goes away first stops after its update in progress and publishes nothing, so a
vanished caller never holds the learner (one Train at a time) and its retry trains anew.
Episodes reach replay through `ingest` (the bus consumer), which wakes any Train waiting for them.
SetServing moves the registry's serving pointer (promotion or rollback) and announces `policy.serving`.
Policies leave the learner as bytes (GetPolicy), never as paths: planners may run on other machines.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import AsyncIterator

import grpc

from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.core.learn.replay import OFFLINE, ONLINE
from evoskill.events.v1 import events_pb2
from evoskill.learner.registry import PolicyEntry
from evoskill.learner.trainer import Ingested, PolicyTrainer, TrainResult
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.rpc import rpc_method

SERVICE_NAME = "evoskill.learner.v1.LearnerService"
IMPORT_BATCH = 256  # imported episodes stored per sqlite transaction (and exported per read)


def train_reply(result: TrainResult) -> learner_pb2.TrainReply:
    return learner_pb2.TrainReply(
        policy_version=result.entry.version, losses=result.losses, samples=result.samples,
        replay_size=result.replay_size, replay_episodes=result.replay_episodes, steps=result.steps)


def policy_info(entry: PolicyEntry, onnx: bytes = b"", serving: bool = False) -> learner_pb2.PolicyInfo:
    return learner_pb2.PolicyInfo(version=entry.version, onnx_model=onnx, created_unix_ms=entry.created_unix_ms,
                                  metrics=entry.metrics, serving=serving)


class LearnerServicer(learner_pb2_grpc.LearnerServiceServicer):
    def __init__(self, trainer: PolicyTrainer, bus: Bus | None) -> None:
        self.trainer = trainer
        self.bus = bus
        self.training = asyncio.Lock()  # one Train at a time: they share θ and its optimiser
        self.ingested = asyncio.Condition()  # notified after each episode the bus delivered

    async def ingest(self, episode: events_pb2.EpisodeCompleted) -> Ingested:
        """Store an episode from the bus (in a thread: sqlite) and wake the Trains waiting for episodes."""
        outcome = await asyncio.to_thread(self.trainer.ingest, episode)
        async with self.ingested:
            self.ingested.notify_all()
        return outcome

    async def wait_for_episodes(self, episode_ids: list[str], wait_seconds: float) -> None:
        """Episodes travel over the bus; a caller that just played them waits until each has been ingested."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        missing = list(dict.fromkeys(episode_ids))
        async with self.ingested:
            while missing := [e for e in missing if not self.trainer.has(e)]:
                # An evaluation's episode never lands in replay: say so now instead of timing out.
                problems = [p for p in map(self.trainer.fold_problem, missing) if p]
                if problems:
                    raise InvalidInput("; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else ""))
                if loop.time() >= deadline:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ingested.wait(), deadline - loop.time())
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise FailedPrecondition(f"{len(missing)} of {len(set(episode_ids))} episodes are not in replay "
                                     f"after {wait_seconds:g}s: {shown}")

    @rpc_method
    async def Train(self, request: learner_pb2.TrainRequest,
                    context: grpc.aio.ServicerContext) -> learner_pb2.TrainReply:
        done = await asyncio.to_thread(self.trainer.made_by, request.request_id)
        if done is not None:  # answered before: its episodes may have left replay since, so no waiting
            return train_reply(done)
        await self.wait_for_episodes(list(request.episode_ids), request.wait_seconds)
        fraction = request.online_fraction if request.HasField("online_fraction") else None
        async with self.training:
            # A retry that arrived while the first call was still training finds its version now.
            done = await asyncio.to_thread(self.trainer.made_by, request.request_id)
            if done is not None:
                return train_reply(done)
            stop = threading.Event()
            work = asyncio.ensure_future(asyncio.to_thread(self.trainer.train, request.steps, request.batch_size,
                                                           fraction, request.seed, request.request_id,
                                                           request.from_version, stop))
            try:
                result = await asyncio.shield(work)
            except asyncio.CancelledError:
                # The caller went away (deadline, a dead worker, a draining server): a million updates nobody
                # waits for would hold the lock and every other Train behind it for hours, so the thread stops
                # after its update in progress and puts θ back; a retry with the same id trains anew.
                stop.set()
                await asyncio.wait([work])
                work.exception()  # TrainingStopped, or whatever ended it: nobody is left to answer
                raise
        reply = train_reply(result)
        if self.bus is not None:
            await self.bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(
                version=result.entry.version, metrics=result.entry.metrics))
        return reply

    @rpc_method
    async def GetPolicy(self, request: learner_pb2.GetPolicyRequest,
                        context: grpc.aio.ServicerContext) -> learner_pb2.PolicyInfo:
        registry = self.trainer.registry
        if request.serving and request.version:
            raise InvalidInput("give either version or serving, not both")
        serving = await asyncio.to_thread(registry.serving_entry)
        # NotFound -> NOT_FOUND, bad form -> INVALID_ARGUMENT
        entry = serving if request.serving else registry.get(request.version)
        onnx = await asyncio.to_thread(registry.path(entry).read_bytes)
        return policy_info(entry, onnx, serving=entry.number == serving.number)

    @rpc_method
    async def ListPolicies(self, request: learner_pb2.ListPoliciesRequest,
                           context: grpc.aio.ServicerContext) -> learner_pb2.ListPoliciesReply:
        registry = self.trainer.registry
        entries, record = await asyncio.to_thread(lambda: (registry.list(), registry.serving()))
        serves = record.version if record else (entries[-1].version if entries else "")
        return learner_pb2.ListPoliciesReply(
            policies=[policy_info(e, serving=e.version == serves) for e in entries],
            serving_version=record.version if record else "", serving_reason=record.reason if record else "",
            serving_changed_unix_ms=record.changed_unix_ms if record else 0)

    @rpc_method
    async def SetServing(self, request: learner_pb2.SetServingRequest,
                         context: grpc.aio.ServicerContext) -> learner_pb2.SetServingReply:
        # NotFound -> NOT_FOUND; malformed version or empty reason -> INVALID_ARGUMENT
        previous, now = await asyncio.to_thread(self.trainer.registry.set_serving, request.version, request.reason)
        before = previous.version if previous else ""
        if self.bus is not None:
            await self.bus.publish(Subjects.POLICY_SERVING, events_pb2.PolicyServing(
                version=now.version, previous_version=before, reason=now.reason,
                changed_unix_ms=now.changed_unix_ms))
        return learner_pb2.SetServingReply(previous_version=before, serving_version=now.version,
                                           changed_unix_ms=now.changed_unix_ms)

    @rpc_method
    async def ImportEpisodes(self, request_iterator: AsyncIterator[learner_pb2.ImportEpisodesRequest],
                             context: grpc.aio.ServicerContext) -> learner_pb2.ImportEpisodesReply:
        received = stored = 0
        batch: list[events_pb2.EpisodeCompleted] = []
        async for request in request_iterator:
            batch.append(request.episode)
            if len(batch) == IMPORT_BATCH:
                stored += await asyncio.to_thread(self.trainer.import_episodes, batch, received)
                received, batch = received + len(batch), []
        if batch:
            stored += await asyncio.to_thread(self.trainer.import_episodes, batch, received)
            received += len(batch)
        library = self.trainer.replay.offline
        return learner_pb2.ImportEpisodesReply(received=received, stored=stored, duplicates=received - stored,
                                               library_episodes=len(library.episode_ids), library_steps=len(library))

    async def ExportEpisodes(self, request: learner_pb2.ExportEpisodesRequest,
                             context: grpc.aio.ServicerContext) -> AsyncIterator[events_pb2.EpisodeCompleted]:
        stored = self.trainer.replay.stored((OFFLINE, ONLINE) if request.include_online else (OFFLINE,))
        while chunk := await asyncio.to_thread(lambda: list(itertools.islice(stored, IMPORT_BATCH))):
            for episode in chunk:
                yield episode

    async def close(self) -> None:
        async with self.training:  # let a running Train finish its checkpoint before replay closes
            self.trainer.close()
