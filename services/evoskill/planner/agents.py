"""The planner's agents (core/agent.py's interface) over sandbox sessions, and the one factory that builds
them from a request: `random`, `demo` (the environment's gold path), `policy` (θ alone, greedy), `mcts`
(search on uniform priors), `policy+mcts` (search advised by θ), `llm` (the LLM's first choice, no search)
and `llm+mcts` (search on the LLM's priors and proposals). Each reads the episode's memory from the step and
leaves it alone; retrieved memories advise θ and search, and where llm.base_url is set the LLM advises
`policy+mcts` too, its prior combined with θ's by llm.combine (planner/llm.py).
"""

from __future__ import annotations

import contextvars
import logging
import random
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from evoskill.core.agent import Agent, AgentKind, Decision, EpisodeMemory, RandomAgent, Step, listed_forms
from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.core.exploration import CURIOSITY, NOVELTY, STALLED, UNCERTAIN, novelty_bonus
from evoskill.core.memory.fusion import tips_from_memories
from evoskill.core.reward import Scorer
from evoskill.core.search import SearchConfig
from evoskill.core.search.advice import PolicyFn, llm_priors, memories, novelty, revisits, theta, visit_counts
from evoskill.core.search.demonstrated import demonstrations, together
from evoskill.core.search.mcts import SearchOutOfTime
from evoskill.core.search.model import Advice, JudgeFn, ProposeFn, RolloutFn, SearchModel
from evoskill.core.search.trigger import needs_search
from evoskill.core.search.types import Evaluation
from evoskill.core.state_text import MAX_RECENT, state_text
from evoskill.events.v1 import events_pb2
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.llm import LlmAdvisor, LlmClient, Usage
from evoskill.planner.search_io import resolve_config, sandbox_simulate, search_reply, search_target
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.telemetry import tracer
from evoskill.sandbox.v1 import sandbox_pb2

log = logging.getLogger(__name__)

Recalled = Callable[[], list[memory_pb2.ScoredExperience]]  # waits for a retrieval started earlier
# Retrievals run beside the step's own work (the root's children stepped in the sandbox), on their own threads:
# the memory service's embedding and query overlap the environment's time instead of adding to it.
_RETRIEVALS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="memory-recall")
RETRIEVE_TIMEOUT_S = 10.0  # memory is advice: a retrieval slower than this costs the step its hints
# Root actions a real step may step after its search to find one that does not lose at once (a replay each on
# ScienceWorld): a sharp θ's first few choices, not a search of its own.
SAFE_TRIES = 4


@dataclass
class AgentTools:
    """What the agents act with: the sandbox, search's in-process scoring and the service's settings, the
    memory service (advice when search.memory_weight > 0), the LLM (when llm.base_url is set)."""

    sandbox: Any
    settings: SearchConfig
    score: Scorer  # search's rewards, in-process: the reward service's function, for its steps and rollouts
    memory: Any = None  # MemoryServiceStub
    llm: LlmClient | None = None
    stop: threading.Event = field(default_factory=threading.Event)  # set when the call playing it has ended

    def model(self, step: Step, config: SearchConfig, policy: PolicyFn | None,
              propose: ProposeFn | None = None, judge: JudgeFn | None = None,
              rollout_policy: RolloutFn | None = None) -> SearchModel:
        """The step's session as the search's environment model, θ advising where given and the LLM asked at
        new nodes where `propose` is given: search charges `revisit_penalty` where the episode has been, θ
        reads its notes with each state, the search ends before its next round once `stop` is set, its
        sandbox calls fit in `time_budget_s`, and θ's dynamics model (where its file has one) gives the
        curiosity bonus where `curiosity_weight` > 0."""
        deadline = time.monotonic() + config.time_budget_s if config.time_budget_s else None
        dynamics = getattr(policy, "dynamics", None) if config.curiosity_weight > 0 else None
        return SearchModel(sandbox_simulate(self.sandbox, step.session_id, deadline), self.score, config,
                           frozenset(step.memory.visited), step.memory.notes,
                           [theta(policy)] if policy is not None else [], step.memory.rooms,
                           tuple(step.memory.taken[-MAX_RECENT:]), tuple(step.memory.scored),
                           cancelled=self.stop.is_set,
                           propose=propose, judge=judge, rollout_policy=rollout_policy, dynamics=dynamics,
                           rollout_workers=self.llm.settings.concurrency if self.llm is not None else 1)

    def llm_advisor(self, step: Step, recalled: Recalled) -> LlmAdvisor | None:
        """The LLM for one step, the memories retrieved for it as tips (waited for: they are in its prompts);
        None where no LLM is configured."""
        if self.llm is None:
            return None
        return LlmAdvisor(self.llm, tips_from_memories(recalled(), self.llm.settings.max_tips), step.memory.taken,
                          step.memory.llm_tokens)

    def candidates(self, step: Step, target: events_pb2.SearchTarget,
                   propose: ProposeFn | None = None) -> SearchModel:
        """The current state with all its children stepped once (no search, no scoring): records the
        templates and which candidates lead back to a state the episode has been in, as search does. Every
        child, however many (search caps them at `prefetch_children` a node; here it is one call a real
        step): a greedy θ offered a no-op such as `look around` would pick it forever."""
        # prefetch_children = 0 (the library's `--no-seen`) steps none: every mark reads False. A child that
        # loses at once stays a candidate: knowing that is a lookahead's, not θ's.
        every_child = self.settings.model_copy(  # and no time budget: a search's, this is none
            update={"prefetch_children": sys.maxsize if self.settings.prefetch_children else 0,
                    "prune_losses": False, "time_budget_s": 0.0})
        env = self.model(step, every_child, None, propose)
        env.root()
        root = env.nodes[()]
        target.templates.extend(root.templates)
        target.seen.extend(env.seen((), root.observation.valid_actions))
        proposed = env.proposed.get((), [])  # the LLM's own candidates: part of the state's, for the learner
        target.actions.extend(proposed)
        target.templates.extend(env.templates((), proposed))
        target.seen.extend(env.seen((), proposed))
        return env

    def advice(self, retrieved: Sequence[memory_pb2.ScoredExperience], config: SearchConfig,
               with_llm: bool = True) -> list[Advice]:
        """Advice for the priors: retrieved memories at the root (when search.memory_weight > 0), and the LLM's
        prior at each node it was asked at (when llm.base_url is set and `with_llm`)."""
        advice = [memories(retrieved, config.memory_weight, config.memory_similar_share)] if retrieved else []
        if with_llm and self.llm is not None:
            advice.append(llm_priors(self.llm.settings.combine, self.llm.settings.prior_weight))
        return advice

    def recall(self, env_spec: str, observation: Any, config: SearchConfig, memory: EpisodeMemory) -> Recalled:
        """Experiences of similar states, when memory guides the search, scored for novelty against what
        this episode has done: the retrieval starts now, in the background (in the step's trace), and the
        function returned waits for it; memory is advice, so a failed retrieval costs the step its hints,
        not the episode."""
        if self.memory is None or config.memory_weight <= 0:
            return list  # nothing to wait for: no memories
        goal, state = state_text(observation)
        request = memory_pb2.RetrieveRequest(goal=goal, state=state, env_spec=env_spec, limit=config.memory_limit,
                                             profile=config.memory_profile, taken_actions=memory.taken,
                                             seed=memory.task_seed)  # this task's own memories of here first
        return _RETRIEVALS.submit(contextvars.copy_context().run, self._retrieve, request).result

    def _retrieve(self, request: memory_pb2.RetrieveRequest) -> list[memory_pb2.ScoredExperience]:
        try:
            reply = self.memory.Retrieve(request, timeout=RETRIEVE_TIMEOUT_S)
        except grpc.RpcError as exc:
            log.warning("memory retrieval failed, searching without hints: %s", exc.details())
            return []
        return list(reply.results)


def candidates_target(step: Step) -> events_pb2.SearchTarget:
    return events_pb2.SearchTarget(actions=list(step.observation.valid_actions))


@dataclass
class DemoAgent:
    """The environment's gold path: a demonstration for the learner's offline library."""

    tools: AgentTools
    gold: deque[str]

    def act(self, step: Step) -> Decision | None:
        target = candidates_target(step)
        # θ learns from it as it reads a real step: the children it steps for that are counted
        env = self.tools.candidates(step, target)
        played = self._gold_step(step.session_id, step.observation.valid_actions, env.nodes[()].state_key)
        if played is None:
            return None
        action, stepped = played
        return Decision(action, target, state_key=env.nodes[()].state_key, env_steps=env.env_steps,
                        env_seconds=env.env_seconds, stepped=stepped)

    def _gold_step(self, session_id: str, listed: Sequence[str], here: str) -> tuple[str, Any] | None:
        """The next action of the gold path the environment accepts, stepped (None once the path is spent).
        One it refuses is passed over: TextWorldExpress's CookingWorld gold paths open the kitchen cupboard a
        second time in some default games (train seed 69). The environment judges, not the valid-action list:
        ScienceWorld accepts gold actions its list does not name — those are played in their listed form
        where one does the same (`_as_listed`)."""
        while self.gold:
            action = self._as_listed(session_id, self.gold.popleft(), listed, here)
            try:
                return action, self.tools.sandbox.Step(sandbox_pb2.StepRequest(session_id=session_id, action=action,
                                                                               publish=True))
            except InvalidInput:  # the library's in-process sandbox
                continue
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                    raise
        return None

    def _as_listed(self, session_id: str, action: str, listed: Sequence[str], here: str) -> str:
        """`action`'s listed form (`listed_forms`) that does the same, probed from `here` (the state's key); else
        `action`. θ chooses among the listed actions only: a library step whose action the list never names
        teaches it a choice it is never offered (θ cloned on ScienceWorld's own gold paths focused on the wrong
        thing). The same: the same state after it, and, where that is the state it was taken in (reading
        something), the same text; a step that changes the state is judged by the state alone, as ScienceWorld's
        answers echo the words typed ("solar panel anode" / "anode in solar panel")."""
        forms = listed_forms(action, listed)
        if not forms:
            return action
        probes = [sandbox_pb2.Probe(actions=[a]) for a in (action, *forms)]
        try:
            reply = self.tools.sandbox.Simulate(sandbox_pb2.SimulateRequest(session_id=session_id, probes=probes,
                                                                            gamma=1.0), timeout=300)
        except (InvalidInput, grpc.RpcError):
            return action  # the environment refuses the probe: the step itself says why
        if len(reply.results) < len(probes):
            return action
        gold, *others = reply.results
        same = [form for form, r in zip(forms, others, strict=True) if r.state_key == gold.state_key
                and (r.observation.text == gold.observation.text or gold.state_key != here)]
        return same[0] if same else action


@dataclass
class PolicyAgent:
    """θ alone: its most likely action among the candidates search would consider. The actions that change
    nothing are left out, as in search; θ alone cannot tell a door it already opened from a closed one as
    well as the world can. Like search, θ reads which candidates lead back to a visited state, and, as search
    charges revisits, each earlier visit to where a candidate leads costs it `policy_revisit_penalty` of
    logit: a greedy policy that loves "move north" otherwise walks between two rooms until the step limit.
    Where a candidate was not stepped (ScienceWorld), the times it was taken here, or in a row just before
    without the score rising, or, for a move, the times the episode entered that room carrying what it carries
    at the score it has, are charged instead (`EpisodeMemory.times_taken`), and one the episode took here
    without changing the state is left out: θ cloned on five gold paths otherwise said "look around" a hundred
    times in a row.
    Retrieved memories tilt its logits as they tilt search's priors (search.memory_weight > 0)."""

    tools: AgentTools
    policy: PolicyFn
    env_spec: str
    config: SearchConfig

    def act(self, step: Step) -> Decision:
        recalled = self.tools.recall(self.env_spec, step.observation, self.config, step.memory)
        target = candidates_target(step)
        env = self.tools.candidates(step, target, taught(self.policy))
        log_rejected(env)
        env.advice += [theta(self.policy), *self.tools.advice(recalled(), self.config, with_llm=False)]
        evaluation = env.advise([()])
        (logits,) = evaluation.logits or []
        actions = list(env.actions(()))
        here, memory = env.nodes[()].state_key, step.memory
        # As search counts them, but a stepped child counts its visits only where it leads back (`seen`).
        visits = visit_counts(memory.visited.__getitem__, memory.times_taken, known=lambda m: m.seen(()))(env)
        charged = np.asarray(logits) - self.config.policy_revisit_penalty * visits
        known_no_op = np.asarray([(here, a) in memory.no_ops for a in actions], dtype=bool)
        if self.config.policy_revisit_penalty and not known_no_op.all():
            charged[known_no_op] = -np.inf  # taken here before and nothing changed: it would change nothing again
        chosen, explored = int(np.argmax(charged)), ""
        if self.config.novelty_weight:
            novel = int(np.argmax(charged + novelty_bonus(visits, self.config.novelty_weight)))
            chosen, explored = novel, (NOVELTY if novel != chosen else "")
        return Decision(actions[chosen], target, state_key=env.nodes[()].state_key, env_steps=env.env_steps,
                        env_seconds=env.env_seconds, value=float(evaluation.values[0]), exploration=explored)


@dataclass
class SearchAgent:
    """MCTS from the session's state: on uniform priors (`mcts`), advised by θ (`policy+mcts`) or by the LLM
    (`llm+mcts`; `policy+mcts` too where one is configured: `with_llm`), with the memories' advice at the
    root; the candidates it considers are the root's without no-ops, and the LLM's proposals."""

    tools: AgentTools
    request: planner_pb2.SearchConfig
    env_spec: str
    policy: PolicyFn | None = None
    with_llm: bool = False

    def act(self, step: Step) -> Decision | None:
        config = resolve_config(self.request, self.tools.settings, step.seed)
        recalled = self.tools.recall(self.env_spec, step.observation, config, step.memory)
        advisor = self.tools.llm_advisor(step, recalled) if self.with_llm else None
        usage = Usage()
        propose = together(advisor.proposer(usage) if advisor is not None else None, taught(self.policy))
        judge = advisor.judge(usage, self.tools.score.rollout(0.0, 1.0, 1.0)) if advisor is not None else None
        rollout_policy = advisor.rollout_policy(usage) if advisor is not None else None
        env = self.tools.model(step, config, self.policy, propose, judge, rollout_policy)
        with tracer().start_as_current_span("planner.search") as span:
            try:
                root, late = env.root(), False
            except SearchOutOfTime:  # the budget went before the root was read: read it, then act on the prior
                env = self.tools.model(step, config.model_copy(update={"time_budget_s": 0.0}), self.policy, propose,
                                       judge, rollout_policy)
                root, late = env.root(), True
            if root.num_actions == 0 and self.with_llm:
                return None  # nothing listed and nothing the LLM proposed: the episode ends
            if root.num_actions == 0:
                raise FailedPrecondition(f"session {step.session_id} has no valid action (episode over?)")
            env.advice += self.tools.advice(recalled(), config, with_llm=advisor is not None)  # root stepped meanwhile
            if self.policy is not None and config.policy_revisit_penalty:
                env.advice.append(revisits(step.memory.visited.__getitem__, config.policy_revisit_penalty,
                                           step.memory.times_taken))
            if config.novelty_weight:
                env.advice.append(novelty(step.memory.visited.__getitem__, step.memory.times_taken,
                                          config.novelty_weight))
            decision = self._decide(env, config, late, span, step)
        log_rejected(env)
        decision.llm = usage if advisor is not None else None
        return decision

    def _decide(self, env: SearchModel, config: SearchConfig, late: bool, span: Any, step: Step) -> Decision:
        triggered = self.policy is not None and config.entropy_trigger > 0
        stalled = 0 < config.stall_trigger <= step.memory.stalled
        if triggered and not stalled:
            sure = self._if_sure(env, config, step)
            if sure is not None:
                span.set_attribute("evoskill.simulations", 0)
                return sure
        try:
            result = None if late else env.run()
        except SearchOutOfTime:  # not even the root's evaluation: act on the prior
            result = None
        span.set_attribute("evoskill.simulations", result.stats.simulations if result else 0)
        if result is None or result.stats.simulations == 0:
            # The environment had no time for one simulation (a slow, replay-only one on a loaded machine):
            # the step acts on the root's prior, θ's where it advises, and the episode goes on.
            return self._on_prior(env, env.advise([()]), step, config, timed_out=True)
        actions = list(env.actions(()))  # the candidates search considered (no-ops dropped)
        if config.prune_losses:
            safe = self._safe_choice(env, step, result.preference())
            if safe != result.action:
                result = result.without(env.losing(), safe)
        chosen = actions[result.action]
        target = search_target(result, env) if result.visit_counts.sum() else prior_target(env)
        return Decision(chosen, target, search_reply(result, actions, chosen),
                        env.nodes[()].state_key, env.env_steps, env.env_seconds, float(result.root_value),
                        exploration=CURIOSITY if env.curiosity_chose(result) else
                        STALLED if triggered and stalled else UNCERTAIN if triggered else "")

    def _if_sure(self, env: SearchModel, config: SearchConfig, step: Step) -> Decision | None:
        """The root prior's argmax, unsearched, where θ (with its advice) is sure enough
        (`entropy_trigger`); None where search should decide."""
        evaluation = env.advise([()])
        (logits,) = evaluation.logits or []
        if needs_search(logits, config.entropy_trigger):
            return None
        return self._on_prior(env, evaluation, step, config)

    def _on_prior(self, env: SearchModel, evaluation: Evaluation, step: Step, config: SearchConfig,
                  timed_out: bool = False) -> Decision:
        """The root prior's argmax (the first candidate where nothing advises), unsearched, or with
        `prune_losses` the first by prior not seen to lose at once (`_safe_choice`). The step's target has no
        visits: the learner reads it as the action taken, as for θ alone."""
        actions = list(env.actions(()))
        logits = np.asarray(evaluation.logits[0] if evaluation.logits is not None else np.zeros(len(actions)))
        priors = np.exp(logits - np.max(logits))
        order = np.argsort(-logits, kind="stable").tolist()
        chosen = actions[self._safe_choice(env, step, order) if config.prune_losses else order[0]]
        root = env.nodes[()]
        target = prior_target(env)
        reply = planner_pb2.SearchReply(
            action=chosen, root=[planner_pb2.ActionStat(action=a, prior=float(p))
                                 for a, p in zip(actions, priors / priors.sum(), strict=True)],
            stats=planner_pb2.TreeStats(env_steps=env.env_steps, timed_out=timed_out))
        return Decision(chosen, target, reply, root.state_key, env.env_steps, env.env_seconds,
                        float(evaluation.values[0]))

    def _safe_choice(self, env: SearchModel, step: Step, order: list[int]) -> int:
        """`SearchModel.safe_choice` once the search is over: its probes are the real step's, outside the
        search's time budget (one replay each, at most SAFE_TRIES)."""
        env.simulate = sandbox_simulate(self.tools.sandbox, step.session_id)
        return env.safe_choice(order, SAFE_TRIES)


def prior_target(env: SearchModel) -> events_pb2.SearchTarget:
    """The root's candidates without search statistics: the learner reads the step as the action taken."""
    listed = env.listed(())
    return events_pb2.SearchTarget(actions=listed, templates=env.templates((), listed), seen=env.seen((), listed))


@dataclass
class LlmAgent:
    """The LLM's first choice, no search (`llm`): it ranks the state's candidates, or, where the environment
    lists few (tool tasks), proposes actions of its own, which the environment must take. Its prior combines
    with the memories' (llm.combine); where it gives nothing usable, the step acts on the memories' advice
    alone (the first candidate where there is none) and says why in the log."""

    tools: AgentTools
    env_spec: str
    config: SearchConfig

    def act(self, step: Step) -> Decision | None:
        recalled = self.tools.recall(self.env_spec, step.observation, self.config, step.memory)
        advisor = self.tools.llm_advisor(step, recalled)
        if advisor is None:
            raise FailedPrecondition("agent 'llm' needs an LLM, and llm.base_url is not set")
        usage = Usage()
        target = candidates_target(step)
        env = self.tools.candidates(step, target, advisor.proposer(usage))
        log_rejected(env)
        env.advice += self.tools.advice(recalled(), self.config)
        actions = list(env.actions(()))
        if not actions:
            return None  # nothing listed and nothing the LLM proposed: the episode ends
        evaluation = env.advise([()])
        logits = evaluation.logits[0] if evaluation.logits is not None else np.zeros(len(actions))
        chosen = actions[int(np.argmax(logits))]
        if not env.ranked.get(()):
            log.info("no usable LLM answer at step %d: acting on the memories' advice or the first candidate",
                     step.index)
        return Decision(chosen, target, state_key=env.nodes[()].state_key, env_steps=env.env_steps,
                        env_seconds=env.env_seconds, value=float(evaluation.values[0]), llm=usage)


def taught(policy: PolicyFn | None) -> ProposeFn | None:
    """The unlisted actions θ was taught, proposed where the state names their objects; None where it has none."""
    actions = getattr(policy, "demonstrated", ())
    return demonstrations(actions) if actions else None


def log_rejected(env: SearchModel) -> None:
    for action, why in env.rejected:
        log.info("the environment refused the proposed action %r: %s", action[:200], why[:300])


# -- the factory ----------------------------------------------------------------------------------------------


# Builds an agent from its tools, the request, θ (for the kinds that use one) and the session's gold path.
Build = Callable[[AgentTools, planner_pb2.PlayEpisodeRequest, PolicyFn | None, Sequence[str]], Agent]


def _policy(tools: AgentTools, request: planner_pb2.PlayEpisodeRequest, policy: PolicyFn | None,
            gold: Sequence[str]) -> PolicyAgent:
    assert policy is not None
    return PolicyAgent(tools, policy, request.env_spec, SearchConfig.from_proto(request.config, tools.settings))


def _demo(tools: AgentTools, request: planner_pb2.PlayEpisodeRequest, policy: PolicyFn | None,
          gold: Sequence[str]) -> DemoAgent:
    if not gold:
        raise InvalidInput(f"{request.env_spec} gives no gold path to demonstrate (agent 'demo')")
    return DemoAgent(tools, deque(gold))


BUILDERS: dict[AgentKind, Build] = {
    AgentKind.MCTS: lambda tools, request, policy, gold: SearchAgent(tools, request.config, request.env_spec),
    AgentKind.RANDOM: lambda tools, request, policy, gold: RandomAgent(random.Random(request.seed)),
    AgentKind.POLICY: _policy,
    AgentKind.POLICY_MCTS: lambda tools, request, policy, gold: SearchAgent(tools, request.config,
                                                                             request.env_spec, policy, True),
    AgentKind.DEMO: _demo,
    AgentKind.LLM: lambda tools, request, policy, gold: LlmAgent(
        tools, request.env_spec, SearchConfig.from_proto(request.config, tools.settings)),
    AgentKind.LLM_MCTS: lambda tools, request, policy, gold: SearchAgent(tools, request.config, request.env_spec,
                                                                          with_llm=True),
}


def agent_kind(config: planner_pb2.SearchConfig) -> AgentKind:
    """The kind `config.agent` names (empty = mcts); InvalidInput for any other name."""
    return AgentKind.parse(config.agent)


def playable_kind(config: planner_pb2.SearchConfig, policy: PolicyFn | None) -> AgentKind:
    """`agent_kind`, and FailedPrecondition where it plays with θ and none is loaded."""
    kind = agent_kind(config)
    if kind.uses_policy and policy is None:
        raise FailedPrecondition(f"agent {kind.value!r} needs a published policy, and none is loaded")
    return kind


def build_agent(tools: AgentTools, request: planner_pb2.PlayEpisodeRequest, policy: PolicyFn | None,
                gold_path: Sequence[str] = ()) -> Agent:
    """The agent the request names, with θ = `policy` where it plays with one and the session's `gold_path`
    for the demonstration."""
    return BUILDERS[playable_kind(request.config, policy)](tools, request, policy, gold_path)


__all__ = ["BUILDERS", "AgentTools", "DemoAgent", "LlmAgent", "PolicyAgent", "SearchAgent", "agent_kind",
           "build_agent", "playable_kind"]
