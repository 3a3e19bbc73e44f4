"""The planner's side of search: the config a request resolves to, a sandbox session's `Simulate` as the
search model's `simulate`, and what a search reports (the learner's target, the caller's reply)."""

from __future__ import annotations

import time
from typing import Any

import grpc
import numpy as np

from evoskill.core.agent import AgentKind
from evoskill.core.errors import InvalidInput
from evoskill.core.search import SearchConfig, SearchResult
from evoskill.core.search.model import SearchModel, SimulateFn
from evoskill.events.v1 import events_pb2
from evoskill.planner.v1 import planner_pb2
from evoskill.sandbox.v1 import sandbox_pb2


def resolve_config(request: planner_pb2.SearchConfig, defaults: SearchConfig, seed: int) -> SearchConfig:
    """The request's fields where set, the service's settings elsewhere; `seed` is the caller's
    (an episode's step takes its own: EpisodeMemory.step_seed)."""
    config = SearchConfig.from_proto(request, defaults).with_seed(seed)
    if request.agent == AgentKind.POLICY_MCTS and not request.HasField("value_mix"):  # θ's value head weighs in
        config = config.model_copy(update={"value_mix": config.policy_value_mix})
    return config


def sandbox_simulate(sandbox: Any, session_id: str, deadline: float | None = None) -> SimulateFn:
    """The session's `Simulate` as the search model's `simulate`; with `deadline` (time.monotonic()), each call
    is given what is left of it as its own, and none is made once it has passed (no probe answered)."""

    def simulate(probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        timeout: dict[str, float] = {}
        if deadline is not None:
            timeout["timeout"] = deadline - time.monotonic()
            if timeout["timeout"] <= 0:
                return [], 0
        try:
            reply = sandbox.Simulate(sandbox_pb2.SimulateRequest(session_id=session_id, probes=probes, gamma=gamma),
                                     **timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT:  # a probe's action the env refused (an LLM's)
                raise InvalidInput(exc.details() or "a probe's action was refused") from None
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
            return [], 0  # one probe outlasted the whole deadline: as out of time as an unanswered one
        return list(reply.results), reply.env_steps

    return simulate


def q_values(result: SearchResult) -> np.ndarray:
    """Unvisited actions have no Q; report the root value there (targets need numbers)."""
    return np.nan_to_num(np.asarray(result.q_values, dtype=np.float64), nan=float(result.root_value))


def search_target(result: SearchResult, env: SearchModel) -> events_pb2.SearchTarget:
    """The root's statistics over EVERY candidate (valid actions and the LLM's proposals): the ones search
    dropped as no-ops get no visits and Q = -noop_penalty, so that θ learns they are useless rather than never
    seeing them."""
    candidates = {a: i for i, a in enumerate(env.actions(()))}
    probs = result.visit_distribution  # a search without visits has none to teach: `prior_target` instead
    q, priors = q_values(result), np.asarray(result.priors)
    target = events_pb2.SearchTarget(root_value=float(result.root_value))
    listed = env.listed(())
    target.seen.extend(env.seen((), listed))
    for action, template in zip(listed, env.templates((), listed), strict=True):
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
                                    early_stopped=s.early_stopped, seconds=s.seconds, timed_out=s.timed_out),
    )
