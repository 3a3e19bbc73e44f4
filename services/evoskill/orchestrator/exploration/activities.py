"""The ExplorationWorkflow's activities: which versions to compare, shadow episodes, promotion and rollback.

Canary and watch episodes are ordinary episodes played through the planner (`training.play_episode`). So is a
shadow episode, with the candidate as the planner's shadow policy: at each real state the baseline decides
and acts, and the candidate decides on the same state, episode memory and search seed (its action and value
only recorded), so the two choices differ only by θ, and the candidate is judged on what it would read serving.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import grpc
from temporalio import activity
from temporalio.exceptions import ApplicationError

from evoskill.core.agent import AgentKind
from evoskill.core.errors import DomainError, FailedPrecondition, NotFound
from evoskill.learner.registry import parse_version
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.orchestrator.exploration.logic import Resolved, ShadowEpisode, ShadowStep, ShadowTask
from evoskill.orchestrator.training.activities import heartbeats, rpc_failure
from evoskill.planner.client import episode_request, play
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel


def shadow_step(update: planner_pb2.EpisodeUpdate) -> ShadowStep:
    """One real step of a shadow episode: the baseline's action and search value, the candidate's choice."""
    candidate = update.shadow
    return ShadowStep(update.action, candidate.action, candidate.valid,
                      candidate.value if math.isfinite(candidate.value) else math.nan, update.search.root_value)


def choose_baseline(candidate: str, asked: str, serving: str, published: list[str]) -> str:
    """The version the candidate is compared with: the one asked for, else the serving one, else (none
    promoted) the newest version older than the candidate. NotFound for a version not published, FailedPrecondition
    where there is no baseline or it is the candidate."""
    if candidate not in published:
        raise NotFound(f"candidate {candidate} is not published (published: {', '.join(published) or 'none'})")
    if asked:
        baseline = f"v{parse_version(asked):06d}"
        if baseline not in published:
            raise NotFound(f"baseline {asked} is not published")
    elif serving:
        baseline = serving
    else:
        older = [v for v in published if parse_version(v) < parse_version(candidate)]
        if not older:
            raise FailedPrecondition(f"no baseline for {candidate}: nothing serves and no older version is published")
        baseline = max(older, key=parse_version)
    if baseline == candidate:
        raise FailedPrecondition(f"candidate {candidate} is already the baseline (it serves): nothing to explore")
    return baseline


class ExplorationActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def _target(self, service: str) -> str:
        return self.settings.endpoint(service).target

    async def _policies(self) -> learner_pb2.ListPoliciesReply:
        async with channel(self._target("learner"), self.settings.grpc) as ch:
            try:
                return await learner_pb2_grpc.LearnerServiceStub(ch).ListPolicies(learner_pb2.ListPoliciesRequest())
            except grpc.aio.AioRpcError as exc:
                raise rpc_failure("learner ListPolicies", exc) from exc

    async def _set_serving(self, version: str, reason: str) -> learner_pb2.SetServingReply:
        async with channel(self._target("learner"), self.settings.grpc) as ch:
            try:
                return await learner_pb2_grpc.LearnerServiceStub(ch).SetServing(
                    learner_pb2.SetServingRequest(version=version, reason=reason))
            except grpc.aio.AioRpcError as exc:
                raise rpc_failure(f"learner SetServing({version})", exc) from exc

    @activity.defn(name="exploration.resolve")
    async def resolve(self, candidate: str, baseline: str) -> Resolved:
        reply = await self._policies()
        published = [p.version for p in reply.policies]
        try:
            cand = f"v{parse_version(candidate):06d}"
            chosen = choose_baseline(cand, baseline, reply.serving_version, published)
        except DomainError as exc:  # bad input or a missing version: asking again changes nothing (a bug is retried)
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from None
        return Resolved(cand, chosen, reply.serving_version, published[-1] if published else "")

    @activity.defn(name="exploration.promote")
    async def promote(self, version: str, reason: str) -> str:
        """Make `version` serve; returns what served before ("" = none promoted)."""
        return (await self._set_serving(version, reason)).previous_version

    @activity.defn(name="exploration.roll_back")
    async def roll_back(self, candidate: str, baseline: str, reason: str) -> str:
        """Make sure the candidate does not serve: where it does (promoted, or the latest while none was ever
        promoted), the baseline serves again. Returns the version serving afterwards. Idempotent."""
        reply = await self._policies()
        serving = reply.serving_version or (reply.policies[-1].version if reply.policies else "")
        if serving != candidate:
            return serving
        return (await self._set_serving(baseline, reason)).serving_version

    @activity.defn(name="exploration.shadow_episode")
    async def shadow_episode(self, task: ShadowTask) -> ShadowEpisode:
        """One episode the baseline plays as it serves (`policy+mcts` through the planner's PlayEpisode), with
        the candidate deciding every step beside it on the same state and episode memory."""
        request = episode_request(task.env, task.seed, task.fold, AgentKind.POLICY_MCTS, task.simulations,
                                  task.max_steps, policy_version=task.baseline)
        request.episode_id, request.shadow_policy_version = task.episode_id, task.candidate
        request.workflow_id = activity.info().workflow_id or ""
        episode = ShadowEpisode(task.episode_id, task.env, task.seed, False, 0.0)

        def on_update(update: planner_pb2.EpisodeUpdate) -> None:
            if update.action:
                episode.steps.append(shadow_step(update))
            activity.heartbeat(update.step_index)

        try:
            async with heartbeats():  # while the planner opens the session (an environment's JVM can take seconds)
                outcome = await play(self.settings, request, on_update)
        except grpc.aio.AioRpcError as exc:
            raise rpc_failure(f"shadow episode {task.episode_id} ({task.env} seed {task.seed})", exc) from exc
        episode.won, episode.total_reward = outcome.won, outcome.total_reward
        return episode

    def all(self) -> list[Callable[..., Any]]:
        return [self.resolve, self.promote, self.roll_back, self.shadow_episode]
