"""Play one episode through the services: the one episode runner (PlayEpisode, eval, demonstrations, the
shadow stage, training). Each real step the agent decides (core/agent.py), the runner acts for real, scores,
records and remembers (the episode's memory: visited states, notes, the actions taken, a seed per step).

Runs in a worker thread with blocking stubs, yielding one `EpisodeUpdate` per real step; the last
update carries `finished`. The returned `EpisodeCompleted` holds the whole trajectory, each step once
(core/episode_record.py), with the search targets of every step (visit distribution, Q values, priors,
root value) for the learner. With a shadow policy, a second agent of the same kind decides every step on the
same state and memory, and its decision rides on the step's update without being acted on. A call that is
cancelled or runs past its deadline sets `stop`: the work behind it ends before the next round of search
(`SearchCancelled`) or real step, and its session is closed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc

from evoskill.core.agent import Agent, AgentKind, EpisodeMemory, Step
from evoskill.core.episode_record import record_step
from evoskill.core.errors import FailedPrecondition, InvalidInput, Unavailable
from evoskill.core.exploration import EpsilonGreedy
from evoskill.core.reward import Scorer
from evoskill.core.search import SearchConfig
from evoskill.core.search.advice import PolicyFn
from evoskill.envs.registry import search_settings
from evoskill.events.v1 import events_pb2
from evoskill.planner.agents import BUILDERS, AgentTools, agent_kind, playable_kind
from evoskill.planner.llm import LlmClient
from evoskill.planner.search_io import resolve_config
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.telemetry import current_trace_id, tracer
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.v1 import sandbox_pb2

log = logging.getLogger(__name__)


def validate(request: planner_pb2.PlayEpisodeRequest, defaults: SearchConfig) -> None:
    """Refuse a request that cannot be played, whichever agent plays it (the config is read even by the agents
    that do not search: a bad value is bad input however it is used)."""
    if not request.env_spec:
        raise InvalidInput("env_spec is empty; e.g. 'twx:coin'")
    kind = agent_kind(request.config)
    if request.shadow_policy_version and not kind.uses_policy:
        raise InvalidInput(f"shadow_policy_version needs an agent that plays with a policy, not "
                           f"{kind.value!r}")
    if request.config.HasField("num_simulations") and request.config.num_simulations < 1:
        raise InvalidInput("config.num_simulations must be >= 1")
    if request.max_steps < 0:
        raise InvalidInput("max_steps must be >= 0")
    resolve_config(request.config, defaults, 0)


def lost_session(exc: grpc.RpcError, session_id: str) -> Exception:
    """A sandbox call's failure as the episode's: NOT_FOUND naming the episode's own session means its sandbox
    lost it mid-episode (restarted, or the environment's worker crashed), which playing the episode again fixes:
    UNAVAILABLE, so that a workflow retries it instead of taking it for a caller's mistake."""
    details = exc.details() or ""
    if exc.code() == grpc.StatusCode.NOT_FOUND and session_id in details:
        return Unavailable(f"the sandbox lost the episode's session mid-episode: {details}")
    return exc


def explore(agent: Agent, kind: AgentKind, epsilon: float) -> Agent:
    """`agent` under ε-greedy exploration where it is asked for (never the gold path or the random baseline)."""
    if epsilon <= 0 or kind in (AgentKind.DEMO, AgentKind.RANDOM):
        return agent
    return EpsilonGreedy(agent, epsilon)


def episode_memory(request: planner_pb2.PlayEpisodeRequest) -> EpisodeMemory:
    """An empty memory seeded by the request's search seed (its episode seed where the config sets none)."""
    return EpisodeMemory(seed=request.config.seed if request.config.HasField("seed") else request.seed,
                         task_seed=request.seed)


@dataclass
class EpisodePlayer:
    sandbox: Any
    reward: Any
    settings: SearchConfig
    score: Scorer  # search's rewards, in-process: the reward service's function, for its steps and rollouts
    policy: PolicyFn | None = None
    memory: Any = None  # MemoryServiceStub; used when settings.memory_weight > 0
    llm: LlmClient | None = None  # an OpenAI-compatible model inside the search, when configured
    shadow_policy: PolicyFn | None = None  # θ of the request's shadow_policy_version
    completed: events_pb2.EpisodeCompleted = field(default_factory=events_pb2.EpisodeCompleted)
    stats: list[events_pb2.SearchStats] = field(default_factory=list)
    episode: EpisodeMemory = field(default_factory=EpisodeMemory)  # what the episode played so far remembers
    stop: threading.Event = field(default_factory=threading.Event)  # set when the call playing it has ended

    def play(self, request: planner_pb2.PlayEpisodeRequest) -> Iterator[planner_pb2.EpisodeUpdate]:
        validate(request, self.settings)
        kind = playable_kind(request.config, self.policy)
        if request.shadow_policy_version:
            playable_kind(request.config, self.shadow_policy)
        if kind.uses_llm and self.llm is None:
            raise FailedPrecondition(f"agent {kind.value!r} needs an LLM, and llm.base_url is not set")
        fold = request.fold or "test"
        episode_id = request.episode_id or uuid.uuid4().hex
        max_steps = request.max_steps or self.settings.max_episode_steps
        with tracer().start_as_current_span("planner.episode") as span:
            span.set_attribute("evoskill.episode_id", episode_id)
            span.set_attribute("evoskill.env_spec", request.env_spec)
            span.set_attribute("evoskill.agent", kind.value)
            if request.workflow_id:
                span.set_attribute("evoskill.workflow_id", request.workflow_id)
            session = self.sandbox.CreateSession(
                sandbox_pb2.CreateSessionRequest(env_spec=request.env_spec, seed=request.seed, fold=fold,
                                                 episode_id=episode_id, gold_path=kind.gold_path), timeout=180)
            self.completed = events_pb2.EpisodeCompleted(
                episode_id=episode_id, env_spec=request.env_spec, seed=request.seed, fold=fold, agent=kind.value,
                policy_version=request.config.policy_version, trace_id=current_trace_id(),
                workflow_id=request.workflow_id)
            self.episode = episode_memory(request)
            try:
                settings = search_settings(request.env_spec, self.settings)  # what its environment needs
                tools = AgentTools(self.sandbox, settings, self.score, self.memory, self.llm, self.stop)
                agent = explore(BUILDERS[kind](tools, request, self.policy, session.gold_path), kind,
                                resolve_config(request.config, settings, 0).explore_epsilon)
                shadow = (BUILDERS[kind](tools, request, self.shadow_policy, ()) if request.shadow_policy_version
                          else None)
                yield from self._loop(agent, shadow, session, max_steps, kind.uses_llm)
            except grpc.RpcError as exc:
                raise lost_session(exc, session.session_id) from None
            finally:
                self._close(session.session_id)

    def _close(self, session_id: str) -> None:
        """Best effort: a session its sandbox already lost (or a sandbox that is down) must not hide the
        episode's own outcome or error behind the close's failure."""
        try:
            self.sandbox.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=session_id))
        except grpc.RpcError as exc:
            log.info("session %s not closed: %s: %s", session_id, exc.code().name, exc.details())

    def _loop(self, agent: Agent, shadow: Agent | None, session: Any, max_steps: int,
              proposes: bool = False) -> Iterator[planner_pb2.EpisodeUpdate]:
        obs, env_steps, began, own = session.observation, 0, time.perf_counter(), 0.0
        for index in range(max_steps):
            if obs.done or not (obs.valid_actions or proposes):  # an LLM may act where nothing is listed
                break
            step = Step(session.session_id, obs, index, self.episode.step_seed(index), self.episode)
            started = time.perf_counter()
            decision = agent.act(step)
            if decision is None:
                break
            deciding = time.perf_counter() - started
            own += max(deciding - decision.env_seconds, 0.0)
            if decision.search is not None:
                self._record_search(index, decision.search.stats, deciding)
            shadowed = self._shadow(shadow, step) if shadow is not None else None
            played = decision.stepped or self.sandbox.Step(
                sandbox_pb2.StepRequest(session_id=session.session_id, action=decision.action, publish=True))
            cost = decision.env_steps
            env_steps += cost + 1
            transition = played.transition
            self.episode.record(decision.state_key, decision.action, transition.after.text, transition.after.score,
                                moved=(transition.before, transition.after))
            if decision.llm is not None:
                self.episode.llm_tokens += decision.llm.prompt_tokens + decision.llm.completion_tokens
            score = self.reward.Score(reward_pb2.ScoreRequest(transition=transition))
            record_step(self.completed, transition, decision.target, score.total, env_steps=cost + 1,
                        llm=decision.llm).exploration = decision.exploration
            self.completed.total_reward += score.total
            obs = transition.after
            finished = obs.done or index == max_steps - 1
            self._finish(obs, env_steps)
            yield planner_pb2.EpisodeUpdate(
                episode_id=self.completed.episode_id, step_index=index, action=decision.action, observation=obs,
                search=decision.search, finished=finished, total_reward=self.completed.total_reward,
                env_steps=env_steps, shadow=shadowed, seconds=time.perf_counter() - began, planner_seconds=own,
                trace_id=self.completed.trace_id, llm=self.completed.llm, exploration=decision.exploration,
                walks_back=self.episode.walks_back)
            if finished:
                return
        self._finish(obs, env_steps)
        yield planner_pb2.EpisodeUpdate(episode_id=self.completed.episode_id, step_index=len(self.completed.steps),
                                        observation=obs, finished=True, total_reward=self.completed.total_reward,
                                        env_steps=env_steps, seconds=time.perf_counter() - began,
                                        planner_seconds=own, trace_id=self.completed.trace_id, llm=self.completed.llm,
                                        walks_back=self.episode.walks_back)

    def _shadow(self, shadow: Agent, step: Step) -> planner_pb2.ShadowDecision:
        """What the shadow agent decides in the state the acting one is about to act in (after it: the acting
        agent's search is never touched by the shadow's)."""
        decision = shadow.act(step)
        if decision is None:
            return planner_pb2.ShadowDecision()
        valid = decision.action in step.observation.valid_actions
        return planner_pb2.ShadowDecision(action=decision.action, valid=valid, value=decision.value)

    def _record_search(self, index: int, stats: planner_pb2.TreeStats, seconds: float) -> None:
        self.stats.append(events_pb2.SearchStats(
            episode_id=self.completed.episode_id, step_index=index, simulations=stats.simulations,
            nodes=stats.nodes, max_depth=stats.max_depth, early_stopped=stats.early_stopped, seconds=seconds))

    def _finish(self, obs: Any, env_steps: int) -> None:
        self.completed.score, self.completed.won, self.completed.env_steps = obs.score, obs.won, env_steps
