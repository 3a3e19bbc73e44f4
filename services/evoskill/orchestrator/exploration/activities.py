"""The ExplorationWorkflow's activities: which versions to compare, shadow episodes, promotion and rollback.

Canary and watch episodes are ordinary episodes played through the planner (`training.play_episode`). A
shadow episode is played here, step by step, over a sandbox session: at each real state the planner searches
once with the baseline (whose action is taken) and once with the candidate (whose action and value are only
recorded), both with the same search seed, so the two choices differ only by θ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import grpc
from temporalio import activity
from temporalio.exceptions import ApplicationError

from evoskill.learner.registry import parse_version
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.orchestrator.exploration.logic import Resolved, ShadowEpisode, ShadowStep, ShadowTask
from evoskill.orchestrator.training.activities import rpc_failure
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import Settings
from evoskill.platform.replicas import owner_of, pick
from evoskill.platform.rpc import channel
from evoskill.reward.v1 import reward_pb2, reward_pb2_grpc
from evoskill.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc


def choose_baseline(candidate: str, asked: str, serving: str, published: list[str]) -> str:
    """The version the candidate is compared with: the one asked for, else the serving one, else (none
    promoted) the newest version older than the candidate. ValueError when there is none or it is the candidate."""
    if candidate not in published:
        raise ValueError(f"candidate {candidate} is not published (published: {', '.join(published) or 'none'})")
    if asked:
        baseline = f"v{parse_version(asked):06d}"
        if baseline not in published:
            raise ValueError(f"baseline {asked} is not published")
    elif serving:
        baseline = serving
    else:
        older = [v for v in published if parse_version(v) < parse_version(candidate)]
        if not older:
            raise ValueError(f"no baseline for {candidate}: nothing serves and no older version is published")
        baseline = max(older, key=parse_version)
    if baseline == candidate:
        raise ValueError(f"candidate {candidate} is already the baseline (it serves): nothing to explore")
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
        except ValueError as exc:
            raise ApplicationError(str(exc), type="InvalidArgument", non_retryable=True) from None
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
        """The session is made on any sandbox replica and then reached at the one holding it, by this activity
        and by whichever planner replica searches it (the planner dials the replica its id names)."""
        grpc_settings = self.settings.grpc
        try:
            async with channel(pick(self.settings.endpoint("sandbox")), grpc_settings) as any_sandbox:
                session = await sandbox_pb2_grpc.SandboxServiceStub(any_sandbox).CreateSession(
                    sandbox_pb2.CreateSessionRequest(env_spec=task.env, seed=task.seed, fold=task.fold,
                                                     episode_id=task.episode_id), timeout=300)
            async with channel(owner_of(session.session_id), grpc_settings) as sandbox_ch, \
                    channel(pick(self.settings.endpoint("planner")), grpc_settings) as planner_ch, \
                    channel(pick(self.settings.endpoint("reward")), grpc_settings) as reward_ch:
                sandbox = sandbox_pb2_grpc.SandboxServiceStub(sandbox_ch)
                planner = planner_pb2_grpc.PlannerServiceStub(planner_ch)
                reward = reward_pb2_grpc.RewardServiceStub(reward_ch)
                try:
                    return await self._shadow_loop(task, session, sandbox, planner, reward, activity.heartbeat)
                finally:
                    await sandbox.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=session.session_id))
        except grpc.aio.AioRpcError as exc:
            raise rpc_failure(f"shadow episode {task.episode_id} ({task.env} seed {task.seed})", exc) from exc

    async def _shadow_loop(self, task: ShadowTask, session: Any, sandbox: Any, planner: Any, reward: Any,
                           beat: Callable[..., None]) -> ShadowEpisode:
        episode = ShadowEpisode(task.episode_id, task.env, task.seed, False, 0.0)
        obs = session.observation
        for index in range(task.max_steps):
            actions = list(obs.valid_actions)
            if obs.done or not actions:
                break
            seed = task.seed * 1000 + index  # as PlayEpisode seeds each step's search

            def config(version: str, seed: int = seed) -> planner_pb2.SearchConfig:
                return planner_pb2.SearchConfig(agent="policy+mcts", policy_version=version,
                                                num_simulations=task.simulations, seed=seed)

            base = await planner.Search(planner_pb2.SearchRequest(session_id=session.session_id,
                                                                  config=config(task.baseline)))
            cand = await planner.Search(planner_pb2.SearchRequest(session_id=session.session_id,
                                                                  config=config(task.candidate)))
            episode.steps.append(ShadowStep(base.action, cand.action, cand.action in actions,
                                            cand.root_value if math.isfinite(cand.root_value) else math.nan,
                                            base.root_value))
            # Only the baseline acts: the step is real (and published like any served step).
            step = await sandbox.Step(sandbox_pb2.StepRequest(session_id=session.session_id, action=base.action,
                                                              publish=True))
            scored = await reward.Score(reward_pb2.ScoreRequest(transition=step.transition))
            episode.total_reward += scored.total
            obs = step.transition.after
            beat(index)
        episode.won = obs.won
        return episode

    def all(self) -> list[Callable[..., Any]]:
        return [self.resolve, self.promote, self.roll_back, self.shadow_episode]
