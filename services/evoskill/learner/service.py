"""The learner process: `episode.completed` -> durable replay; Train -> the next θ, exported and published.

Episodes arrive from the planner over the bus and are stored before the ack (idempotent by episode
id, so a redelivery or a replayed stream is stored once; an episode that can never be training data
is dead-lettered with the reason). Episodes of folds other than `learner.train_folds` (evaluations on
dev/test) are acknowledged and skipped: valid, but not training data. Train runs the update steps in a
worker thread, exports ONNX into the registry folder, checkpoints θ and announces `policy.published`;
planners fetch the new version's bytes with GetPolicy and hot-swap to it.
"""

from __future__ import annotations

import asyncio
import logging

from evoskill.events.v1 import events_pb2
from evoskill.learner.servicer import SERVICE_NAME, LearnerServicer
from evoskill.learner.trainer import PolicyTrainer
from evoskill.learner.v1 import learner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.service import ServiceParts

log = logging.getLogger(__name__)


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    import torch

    torch.set_num_threads(settings.learner.torch_threads)  # the process's intra-op pool, before any update
    trainer = await asyncio.to_thread(PolicyTrainer, settings)  # torch, replay load, checkpoint: blocking
    log.info("learner: %d replay steps restored, next policy version %d", len(trainer.replay),
             trainer.learner.version + 1)
    servicer = LearnerServicer(trainer, bus)

    @bus.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)
    async def on_episode(event: events_pb2.EpisodeCompleted) -> None:
        outcome = await servicer.ingest(event)  # InvalidInput -> dead letter with the reason
        if outcome == "duplicate":
            log.info("learner: episode %s is already in replay", event.episode_id)
        elif outcome == "other_fold":
            log.info("learner: episode %s is from the %r fold, not training data: skipped (%d skipped so far)",
                     event.episode_id, event.fold, trainer.skipped_total)

    return ServiceParts(
        registrations=[(learner_pb2_grpc.add_LearnerServiceServicer_to_server, servicer, SERVICE_NAME)],
        closers=[servicer.close],
    )


__all__ = ["create"]
