"""The reward process: synchronous scoring over gRPC and the `step.executed` -> `reward.scored` path.

Both paths call the same pure function (`evoskill.core.reward.Scorer`) with the same settings, as does
search in the planner (in-process), so the same transition gets the same numbers every way.
"""

from __future__ import annotations

import grpc

from evoskill.common.v1 import common_pb2
from evoskill.core.reward import Scorer
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import rpc_method
from evoskill.platform.service import ServiceParts
from evoskill.reward.v1 import reward_pb2, reward_pb2_grpc

SERVICE_NAME = "evoskill.reward.v1.RewardService"


class RewardServicer(reward_pb2_grpc.RewardServiceServicer):
    def __init__(self, settings: Settings) -> None:
        self.score = Scorer.for_settings(settings)

    @rpc_method
    async def Score(
        self, request: reward_pb2.ScoreRequest, context: grpc.aio.ServicerContext
    ) -> reward_pb2.RewardBreakdown:
        return self.score(request.transition)


def scored_event(transition: common_pb2.Transition, breakdown: reward_pb2.RewardBreakdown) -> events_pb2.RewardScored:
    """The score with the step it scored, less what only scoring needed: the memory (the consumer) reads
    the state's text, the action and the feedback, not the two valid-action lists or the history digest."""
    step = common_pb2.Transition()
    step.CopyFrom(transition)
    del step.before.valid_actions[:], step.after.valid_actions[:]
    step.ClearField("history")
    return events_pb2.RewardScored(
        transition=step,
        total=breakdown.total,
        terms=dict(breakdown.terms),
        completion=breakdown.completion,
        efficiency=breakdown.efficiency,
        safety=breakdown.safety,
        external_failure=breakdown.external_failure,
    )


async def create(settings: Settings, bus: Bus) -> ServiceParts:
    servicer = RewardServicer(settings)

    @bus.consumer(Subjects.STEP_EXECUTED, events_pb2.StepExecuted)
    async def on_step(event: events_pb2.StepExecuted) -> None:
        breakdown = servicer.score(event.transition)  # InvalidInput -> dead letter with the reason
        await bus.publish(Subjects.REWARD_SCORED, scored_event(event.transition, breakdown))

    return ServiceParts(registrations=[(reward_pb2_grpc.add_RewardServiceServicer_to_server, servicer, SERVICE_NAME)])
