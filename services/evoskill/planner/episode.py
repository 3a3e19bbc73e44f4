"""Play one episode through the services: search (or not) each step, act for real, score, record.

Runs in a worker thread with blocking stubs, yielding one `EpisodeUpdate` per real step; the last
update carries `finished`. The returned `EpisodeCompleted` holds the whole trajectory, each step once
(core/episode_record.py), with the search targets of every step (visit distribution, Q values, priors,
root value) for the learner. A call that is cancelled or runs past its deadline sets `stop`: the work
behind it ends before the next round of search (`SearchCancelled`) or real step, and its session is closed.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from evoskill.core.episode_record import record_step
from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.core.memory.fusion import tips_from_memories
from evoskill.core.reward import Scorer
from evoskill.core.search import SearchConfig, SearchResult
from evoskill.core.search.advice import Advice, PolicyFn, memories, ranking, revisits, theta
from evoskill.core.search.model import SearchModel, SimulateFn
from evoskill.core.search.trigger import needs_search
from evoskill.core.state_text import notes_after, state_text
from evoskill.events.v1 import events_pb2
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.llm import LlmProposer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.telemetry import tracer
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.v1 import sandbox_pb2

log = logging.getLogger(__name__)
# "demo" follows the environment's gold path: a demonstration for the learner's offline library.
AGENTS = ("mcts", "random", "policy", "policy+mcts", "demo")


def resolve_config(request: planner_pb2.SearchConfig, defaults: SearchConfig, seed: int) -> SearchConfig:
    """The request's fields where set, the service's settings elsewhere; `seed` is the caller's
    (PlayEpisode derives one per step from the request's: step_seed)."""
    config = SearchConfig.from_proto(request, defaults).with_seed(seed)
    if request.agent == "policy+mcts" and not request.HasField("value_mix"):  # θ's value head weighs in
        config = config.model_copy(update={"value_mix": config.policy_value_mix})
    return config


def sandbox_simulate(sandbox: Any, session_id: str) -> SimulateFn:
    """The session's `Simulate` as the search model's `simulate`."""

    def simulate(probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        reply = sandbox.Simulate(sandbox_pb2.SimulateRequest(session_id=session_id, probes=probes, gamma=gamma))
        return list(reply.results), reply.env_steps

    return simulate


def search_policy(request: planner_pb2.SearchConfig, policy: PolicyFn | None) -> PolicyFn | None:
    """θ advises the search of the policy+mcts agent only (plain mcts searches on uniform priors)."""
    return policy if request.agent == "policy+mcts" else None


def search_env(sandbox: Any, session_id: str, config: SearchConfig, score: Scorer, policy: PolicyFn | None,
               visited: frozenset[str] = frozenset(), notes: str = "", stop: threading.Event | None = None,
               ) -> SearchModel:
    """The sandbox session as the search's environment model, θ advising where given.
    `visited`: state keys the episode has already been in (search charges `revisit_penalty` there);
    `notes`: what the episode has read so far (θ reads it with each state); `stop`: set once nobody waits for
    the search (it ends before its next round)."""
    return SearchModel(sandbox_simulate(sandbox, session_id), score, config, visited, notes,
                       [theta(policy)] if policy is not None else [], cancelled=stop.is_set if stop else None)


def step_seed(request: planner_pb2.PlayEpisodeRequest, index: int) -> int:
    """A different search seed at every real step: with one seed for all steps, a state search misjudges
    once is misjudged again each time the episode comes back to it (the same noise and rollouts)."""
    base = request.config.seed if request.config.HasField("seed") else request.seed
    return base * 1000 + index


def validate(request: planner_pb2.PlayEpisodeRequest, defaults: SearchConfig) -> None:
    """Refuse a request that cannot be played, whichever agent plays it (the config is read even by the agents
    that do not search: a bad value is bad input however it is used)."""
    if not request.env_spec:
        raise InvalidInput("env_spec is empty; e.g. 'twx:coin'")
    agent = request.config.agent or "mcts"
    if agent not in AGENTS:
        raise InvalidInput(f"agent {agent!r} is not one of {', '.join(AGENTS)}")
    if request.config.HasField("num_simulations") and request.config.num_simulations < 1:
        raise InvalidInput("config.num_simulations must be >= 1")
    if request.max_steps < 0:
        raise InvalidInput("max_steps must be >= 0")
    resolve_config(request.config, defaults, 0)


def q_values(result: SearchResult) -> np.ndarray:
    """Unvisited actions have no Q; report the root value there (targets need numbers)."""
    return np.nan_to_num(np.asarray(result.q_values, dtype=np.float64), nan=float(result.root_value))


def search_target(result: SearchResult, env: SearchModel) -> events_pb2.SearchTarget:
    """The root's statistics over EVERY valid action: the ones search dropped as no-ops get no visits and
    Q = -noop_penalty, so that θ learns they are useless rather than never seeing them."""
    root = env.nodes[()]
    candidates = {a: i for i, a in enumerate(env.actions(()))}
    visits = np.asarray(result.visit_counts, dtype=np.float64)
    probs = visits / visits.sum() if visits.sum() > 0 else np.full(len(candidates), 1.0 / max(len(candidates), 1))
    q, priors = q_values(result), np.asarray(result.priors)
    target = events_pb2.SearchTarget(root_value=float(result.root_value))
    target.seen.extend(env.seen((), root.observation.valid_actions))
    for action, template in zip(root.observation.valid_actions, root.templates, strict=True):
        i = candidates.get(action)
        target.actions.append(action)
        target.templates.append(template)
        target.visit_probs.append(float(probs[i]) if i is not None else 0.0)
        target.q_values.append(float(q[i]) if i is not None else -env.config.noop_penalty)
        target.priors.append(float(priors[i]) if i is not None else 0.0)
    if result.policy_target is not None:  # Gumbel's improved policy is θ's target; the dropped no-ops get none
        target.policy_probs.extend(float(result.policy_target[candidates[a]]) if a in candidates else 0.0
                                   for a in target.actions)
    return target


def search_reply(result: SearchResult, actions: list[str], chosen: str) -> planner_pb2.SearchReply:
    s = result.stats
    return planner_pb2.SearchReply(
        action=chosen,
        root=[planner_pb2.ActionStat(action=a, visits=int(v), q=float(q), prior=float(p))
              for a, v, q, p in zip(actions, result.visit_counts, q_values(result), result.priors, strict=True)],
        root_value=float(result.root_value),
        stats=planner_pb2.TreeStats(simulations=s.simulations, nodes=s.nodes, max_depth=s.max_depth,
                                    env_steps=s.env_steps, transposition_hits=s.transposition_hits,
                                    early_stopped=s.early_stopped, seconds=s.seconds),
    )


@dataclass
class EpisodePlayer:
    sandbox: Any
    reward: Any
    settings: SearchConfig
    score: Scorer  # search's rewards, in-process: the reward service's function, for its steps and rollouts
    policy: PolicyFn | None = None
    memory: Any = None  # MemoryServiceStub; used when settings.memory_weight > 0
    llm: LlmProposer | None = None  # an OpenAI-compatible model ranking the root's candidates, when configured
    completed: events_pb2.EpisodeCompleted = field(default_factory=events_pb2.EpisodeCompleted)
    stats: list[events_pb2.SearchStats] = field(default_factory=list)
    visited: Counter[str] = field(default_factory=Counter)  # state keys of the real states so far: times there
    notes: str = ""  # the last document the episode read (core.state_text): part of what θ reads
    stop: threading.Event = field(default_factory=threading.Event)  # set when the call playing it has ended

    def play(self, request: planner_pb2.PlayEpisodeRequest) -> Iterator[planner_pb2.EpisodeUpdate]:
        validate(request, self.settings)
        agent = request.config.agent or "mcts"
        if agent.startswith("policy") and self.policy is None:
            raise FailedPrecondition(f"agent {agent!r} needs a published policy, and none is loaded")
        fold = request.fold or "test"
        episode_id = request.episode_id or uuid.uuid4().hex
        max_steps = request.max_steps or self.settings.max_episode_steps
        rng = random.Random(request.seed)
        with tracer().start_as_current_span("planner.episode") as span:
            span.set_attribute("evoskill.episode_id", episode_id)
            span.set_attribute("evoskill.env_spec", request.env_spec)
            span.set_attribute("evoskill.agent", agent)
            session = self.sandbox.CreateSession(
                sandbox_pb2.CreateSessionRequest(env_spec=request.env_spec, seed=request.seed, fold=fold,
                                                 episode_id=episode_id, gold_path=agent == "demo"), timeout=180)
            self.completed = events_pb2.EpisodeCompleted(
                episode_id=episode_id, env_spec=request.env_spec, seed=request.seed, fold=fold, agent=agent,
                policy_version=request.config.policy_version)
            try:
                yield from self._loop(request, agent, session, max_steps, rng)
            finally:
                self.sandbox.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=session.session_id))

    def _loop(self, request: planner_pb2.PlayEpisodeRequest, agent: str, session: Any, max_steps: int,
              rng: random.Random) -> Iterator[planner_pb2.EpisodeUpdate]:
        obs = session.observation
        if agent == "demo" and not session.gold_path:
            raise InvalidInput(f"{request.env_spec} gives no gold path to demonstrate (agent 'demo')")
        env_steps, gold = 0, deque(session.gold_path)
        for index in range(max_steps):
            actions = list(obs.valid_actions)
            if obs.done or not actions:
                break
            reply, target, step, cost = None, events_pb2.SearchTarget(actions=actions), None, 0
            if agent == "random":
                chosen = actions[rng.randrange(len(actions))]
            elif agent == "policy":
                config = SearchConfig.from_proto(request.config, self.settings)
                chosen, cost = self._act(session.session_id, request.env_spec, target, config)
            elif agent == "demo":
                # θ learns from it as it reads a real step: the children it steps for that are counted
                cost = self._candidates(session.session_id, target).env_steps
                played = self._gold_step(session.session_id, gold)
                if played is None:
                    break
                chosen, step = played
            else:
                chosen, reply, target, cost = self._search(request, session.session_id, index, actions)
            if step is None:
                step = self.sandbox.Step(sandbox_pb2.StepRequest(session_id=session.session_id, action=chosen,
                                                                 publish=True))
            env_steps += cost + 1
            transition = step.transition
            self.notes = notes_after(self.notes, chosen, transition.after.text)
            score = self.reward.Score(reward_pb2.ScoreRequest(transition=transition))
            record_step(self.completed, transition, target, score.total, env_steps=cost + 1)
            self.completed.total_reward += score.total
            obs = transition.after
            finished = obs.done or index == max_steps - 1
            self._finish(obs, env_steps)
            yield planner_pb2.EpisodeUpdate(
                episode_id=self.completed.episode_id, step_index=index, action=chosen, observation=obs,
                search=reply, finished=finished, total_reward=self.completed.total_reward, env_steps=env_steps)
            if finished:
                return
        self._finish(obs, env_steps)
        yield planner_pb2.EpisodeUpdate(episode_id=self.completed.episode_id, step_index=len(self.completed.steps),
                                        observation=obs, finished=True, total_reward=self.completed.total_reward,
                                        env_steps=env_steps)

    def _gold_step(self, session_id: str, gold: deque[str]) -> tuple[str, Any] | None:
        """The next action of the gold path the environment accepts, stepped (None once the path is spent).
        One it refuses is passed over: TextWorldExpress's CookingWorld gold paths open the kitchen cupboard a
        second time in some default games (train seed 69). The environment judges, not the valid-action list:
        ScienceWorld accepts gold actions its list does not name."""
        while gold:
            action = gold.popleft()
            try:
                return action, self.sandbox.Step(sandbox_pb2.StepRequest(session_id=session_id, action=action,
                                                                         publish=True))
            except InvalidInput:  # the library's in-process sandbox
                continue
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
        return None

    def _finish(self, obs: Any, env_steps: int) -> None:
        self.completed.score, self.completed.won, self.completed.env_steps = obs.score, obs.won, env_steps

    def _candidates(self, session_id: str, target: events_pb2.SearchTarget) -> SearchModel:
        """The current state with all its children stepped once (no search, no scoring): records the
        templates and which candidates lead back to a state the episode has been in, as search does. Every
        child, however many (search caps them at `prefetch_children` a node; here it is one call a real
        step): a greedy θ offered a no-op such as `look around` would pick it forever."""
        # prefetch_children = 0 (the library's `--no-seen`) steps none: every mark reads False.
        every_child = self.settings.model_copy(
            update={"prefetch_children": sys.maxsize if self.settings.prefetch_children else 0})
        env = search_env(self.sandbox, session_id, every_child, self.score, None, frozenset(self.visited),
                         self.notes, self.stop)
        env.root()
        root = env.nodes[()]
        target.templates.extend(root.templates)
        target.seen.extend(env.seen((), root.observation.valid_actions))
        self.visited[root.state_key] += 1
        return env

    def _act(self, session_id: str, env_spec: str, target: events_pb2.SearchTarget,
             config: SearchConfig) -> tuple[str, int]:
        """θ's most likely action among the candidates search would consider: the actions that change
        nothing are left out, as in search; θ alone cannot tell a door it already opened from a closed
        one as well as the world can. Like search, θ reads which candidates lead back to a visited state,
        and, as search charges revisits, each earlier visit to where a candidate leads costs it
        `policy_revisit_penalty` of logit: a greedy policy that loves "move north" otherwise walks between
        two rooms until the step limit. Retrieved memories tilt its logits as they tilt search's priors
        (search.memory_weight > 0). Returns the action and the environment steps spent on the children."""
        assert self.policy is not None
        env = self._candidates(session_id, target)
        env.advice += [theta(self.policy), *self._advice(env_spec, env, config, with_llm=False)]
        (logits,) = env.advise([()]).logits or []
        actions = list(env.actions(()))
        visits = [self.visited[env.nodes[(a,)].state_key] if seen else 0
                  for a, seen in zip(actions, env.seen(()), strict=True)]
        charged = np.asarray(logits) - config.policy_revisit_penalty * np.asarray(visits)
        return actions[int(np.argmax(charged))], env.env_steps

    def _advice(self, env_spec: str, env: SearchModel, config: SearchConfig, with_llm: bool = True) -> list[Advice]:
        """Advice for the root's priors: retrieved memories (when search.memory_weight > 0) and the LLM's
        ranking of the candidates, with those memories as tips (when llm.base_url is set and `with_llm`)."""
        retrieved = self._recall(env_spec, env.observation(()), config)
        advice = [memories(retrieved, config.memory_weight)] if retrieved else []
        if with_llm and self.llm is not None:
            llm, tips = self.llm, tips_from_memories(retrieved, self.llm.max_tips)
            advice.append(ranking(lambda goal, state, actions: llm.rank(goal, state, actions, tips)))
        return advice

    def _recall(self, env_spec: str, observation: Any, config: SearchConfig) -> list[memory_pb2.ScoredExperience]:
        """Experiences of similar states, when memory guides the search, scored for novelty against what
        this episode has done; memory is advice, so a failed retrieval costs the step its hints, not the
        episode."""
        if self.memory is None or config.memory_weight <= 0:
            return []
        goal, state = state_text(observation)
        request = memory_pb2.RetrieveRequest(goal=goal, state=state, env_spec=env_spec, limit=config.memory_limit,
                                             profile=config.memory_profile,
                                             taken_actions=[step.action.text for step in self.completed.steps])
        try:
            reply = self.memory.Retrieve(request)
        except grpc.RpcError as exc:
            log.warning("memory retrieval failed, searching without hints: %s", exc.details())
            return []
        return list(reply.results)

    def _search(self, request: planner_pb2.PlayEpisodeRequest, session_id: str, index: int,
                actions: list[str]) -> tuple[str, planner_pb2.SearchReply, events_pb2.SearchTarget, int]:
        config = resolve_config(request.config, self.settings, step_seed(request, index))
        policy = search_policy(request.config, self.policy)
        env = search_env(self.sandbox, session_id, config, self.score, policy, frozenset(self.visited), self.notes,
                         self.stop)
        with tracer().start_as_current_span("planner.search") as span:
            started = time.perf_counter()
            env.root()
            env.advice += self._advice(request.env_spec, env, config)
            if policy is not None and config.policy_revisit_penalty:
                env.advice.append(revisits(self.visited.__getitem__, config.policy_revisit_penalty))
            if policy is not None and config.entropy_trigger > 0:
                sure = self._if_sure(env, config, index)
                if sure is not None:
                    span.set_attribute("evoskill.simulations", 0)
                    return sure
            result = env.run()
            span.set_attribute("evoskill.simulations", result.stats.simulations)
        self.visited[env.nodes[()].state_key] += 1
        actions = list(env.actions(()))  # the candidates search considered (no-ops dropped)
        chosen = actions[result.action]
        self.stats.append(events_pb2.SearchStats(
            episode_id=self.completed.episode_id, step_index=index, simulations=result.stats.simulations,
            nodes=result.stats.nodes, max_depth=result.stats.max_depth, early_stopped=result.stats.early_stopped,
            seconds=time.perf_counter() - started))
        return chosen, search_reply(result, actions, chosen), search_target(result, env), env.env_steps

    def _if_sure(self, env: SearchModel, config: SearchConfig,
                 index: int) -> tuple[str, planner_pb2.SearchReply, events_pb2.SearchTarget, int] | None:
        """The root prior's argmax, unsearched, where θ (with its advice) is sure enough
        (`entropy_trigger`); None where search should decide. The step's target has no visits: the learner
        reads it as the action taken, as for θ alone."""
        (logits,) = env.advise([()]).logits or []
        if needs_search(logits, config.entropy_trigger):
            return None
        self.visited[env.nodes[()].state_key] += 1
        actions, priors = list(env.actions(())), np.exp(logits - np.max(logits))
        chosen = actions[int(np.argmax(logits))]
        root = env.nodes[()]
        target = events_pb2.SearchTarget(actions=root.observation.valid_actions, templates=root.templates,
                                         seen=env.seen((), root.observation.valid_actions))
        reply = planner_pb2.SearchReply(
            action=chosen, root=[planner_pb2.ActionStat(action=a, prior=float(p))
                                 for a, p in zip(actions, priors / priors.sum(), strict=True)],
            stats=planner_pb2.TreeStats(env_steps=env.env_steps))
        self.stats.append(events_pb2.SearchStats(episode_id=self.completed.episode_id, step_index=index))
        return chosen, reply, target, env.env_steps
