"""The reward process: synchronous scoring over gRPC and the `step.executed` -> `reward.scored` path.

Both paths call the same pure function (`evoskill.core.reward.score_transition`) with the same
settings, so the same transition gets the same numbers either way.
"""

from __future__ import annotations

import grpc

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput
from evoskill.core.reward import score_transition
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import rpc_method
from evoskill.platform.service import ServiceParts
from evoskill.reward.v1 import reward_pb2, reward_pb2_grpc

SERVICE_NAME = "evoskill.reward.v1.RewardService"


def check_transition(transition: common_pb2.Transition) -> None:
    if not transition.action.text:
        raise InvalidInput("transition.action.text is empty: nothing to score")


class RewardServicer(reward_pb2_grpc.RewardServiceServicer):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def score(self, transition: common_pb2.Transition) -> reward_pb2.RewardBreakdown:
        check_transition(transition)
        return score_transition(transition, self.settings.reward, max_steps=self.settings.search.max_episode_steps)

    @rpc_method
    async def Score(
        self, request: reward_pb2.ScoreRequest, context: grpc.aio.ServicerContext
    ) -> reward_pb2.RewardBreakdown:
        return self.score(request.transition)

    @rpc_method
    async def ScoreBatch(
        self, request: reward_pb2.ScoreBatchRequest, context: grpc.aio.ServicerContext
    ) -> reward_pb2.ScoreBatchReply:
        for i, transition in enumerate(request.transitions):
            if not transition.action.text:
                raise InvalidInput(f"transitions[{i}].action.text is empty: nothing to score")
        return reward_pb2.ScoreBatchReply(results=[self.score(t) for t in request.transitions])


def scored_event(transition: common_pb2.Transition, breakdown: reward_pb2.RewardBreakdown) -> events_pb2.RewardScored:
    return events_pb2.RewardScored(
        transition=transition,
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
