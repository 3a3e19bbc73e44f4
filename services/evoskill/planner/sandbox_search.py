"""One sandbox session as the search core's environment and evaluator (mctx style: plain callables).

A search state is the path of actions from the session's current state. When a node is created, all
its children are stepped in one sandbox call (`Simulate`) if there are at most `prefetch_children` of
them, and their dense rewards come from the reward service in one `ScoreBatch`; the new nodes of one
search round share those two calls (`step_batch`). Knowing the children up front lets search drop
the actions that change nothing (inventory, look, closing a closed door): in a deterministic world
such an edge is a self-loop that only burns a step. Leaf values mix the policy's value with the return
of a random rollout the sandbox runs next to the environment (one `Simulate` per batch of leaves).

Search-time shaping (on top of the reward service's dense reward): an edge into an environment state
the episode or the path has already visited costs `revisit_penalty`, so that undoing an action (close
after open, put after take, walking back) is never worth doing for its own dense reward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evoskill.core.search import Evaluation, Root, Transition
from evoskill.core.state_text import candidate_text, notes_along, state_text
from evoskill.planner.memory_hints import with_logit_bonus
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.v1 import sandbox_pb2

Path = tuple[str, ...]
# (goal, observation, actions, templates) per state -> (logits per state, values)
PolicyFn = Callable[[Sequence[tuple[str, str, Sequence[str], Sequence[str]]]], tuple[list[np.ndarray], np.ndarray]]


@dataclass
class SandboxSearch:
    sandbox: Any  # SandboxServiceStub over a blocking channel
    reward: Any  # RewardServiceStub over a blocking channel; None = rewards 0 (no scoring)
    session_id: str
    gamma: float = 0.97
    rollout_depth: int = 10
    value_mix: float = 1.0
    rollout_scale: float = 1.0  # reward units per unit of rollout return (SearchSettings.rollout_scale)
    prefetch_children: int = 32
    noop_penalty: float = 1.0
    revisit_penalty: float = 0.0
    visited: frozenset[str] = frozenset()  # state keys the episode has been in (before this search)
    notes: str = ""  # what the episode has read so far (θ's state text carries it)
    policy: PolicyFn | None = None
    root_bonus: np.ndarray | None = None  # logit bonus per root candidate (retrieved memories, an LLM's ranking)
    seed: int = 0
    nodes: dict[Path, sandbox_pb2.ProbeResult] = field(default_factory=dict)
    rewards: dict[Path, float] = field(default_factory=dict)
    useful: dict[Path, list[str]] = field(default_factory=dict)  # the actions search considers per node
    template_ids: dict[str, int] = field(default_factory=dict)
    env_steps: int = 0
    _rollouts: int = 0

    def _simulate(self, probes: list[sandbox_pb2.Probe]) -> list[sandbox_pb2.ProbeResult]:
        if not probes:
            return []
        reply = self.sandbox.Simulate(
            sandbox_pb2.SimulateRequest(session_id=self.session_id, probes=probes, gamma=self.gamma)
        )
        self.env_steps += reply.env_steps
        return list(reply.results)

    def templates(self, path: Path) -> list[str]:
        """The template (skill) of each action search considers at `path`."""
        result = self.nodes[path]
        by_action = dict(zip(result.observation.valid_actions, result.templates, strict=True))
        return [by_action[a] for a in self.useful[path]]

    def _template_ids(self, path: Path) -> list[int]:
        return [self.template_ids.setdefault(t, len(self.template_ids)) for t in self.templates(path)]

    def _step_paths(self, paths: list[Path]) -> None:
        """Step `paths` in one `Simulate` and score them in one `ScoreBatch`."""
        paths = [p for p in dict.fromkeys(paths) if p not in self.nodes]
        results = self._simulate([sandbox_pb2.Probe(actions=p) for p in paths])
        if not results:
            return
        totals = [0.0] * len(results)  # no reward stub: only the children themselves are wanted (θ alone)
        if self.reward is not None:
            scored = self.reward.ScoreBatch(reward_pb2.ScoreBatchRequest(transitions=[r.transition for r in results]))
            totals = [breakdown.total for breakdown in scored.results]
        for path, result, total in zip(paths, results, totals, strict=True):
            self.nodes[path] = result
            self.rewards[path] = total

    def _open(self, parents: list[Path]) -> None:
        """Step the children of new nodes (where few enough) and keep the actions that change something."""
        small = [p for p in parents if len(self.nodes[p].observation.valid_actions) <= self.prefetch_children]
        self._step_paths([(*p, a) for p in small for a in self.nodes[p].observation.valid_actions])
        for parent in parents:
            actions = list(self.nodes[parent].observation.valid_actions)
            if parent in small:
                key = self.nodes[parent].state_key
                effective = [a for a in actions if self.nodes[(*parent, a)].state_key != key]
                actions = effective or actions  # all no-ops: keep them, each a dead end (see step)
            self.useful[parent] = actions

    def root(self) -> Root:
        (result,) = self._simulate([sandbox_pb2.Probe()])
        self.nodes[()] = result
        self._open([()])
        return Root((), len(self.useful[()]), (0, result.state_key), self._template_ids(()))

    def actions(self, path: Path) -> Sequence[str]:
        """The actions search considers at `path` (no-ops dropped); index i is the core's action i."""
        return self.useful[path]

    def notes_at(self, path: Path) -> str:
        """The notes at `path`: the episode's, replaced by a document read on the way."""
        return notes_along(self.notes, path, [self.nodes[path[:k + 1]].observation.text for k in range(len(path))])

    def seen(self, path: Path, actions: Sequence[str] | None = None) -> list[bool]:
        """Per action at `path` (default: the ones search considers): it leads to a state the episode or
        the path has been in; False where the child was never stepped (too many actions to prefetch)."""
        return [(*path, a) in self.nodes and self._visited_before((*path, a))
                for a in (self.useful[path] if actions is None else actions)]

    def candidates(self, path: Path) -> tuple[list[str], list[str]]:
        """(texts θ reads, templates) of the actions search considers at `path`."""
        texts = [candidate_text(a, s) for a, s in zip(self.useful[path], self.seen(path), strict=True)]
        return texts, self.templates(path)

    def _visited_before(self, path: Path) -> bool:
        key = self.nodes[path].state_key
        return key in self.visited or any(self.nodes[path[:k]].state_key == key for k in range(len(path)))

    def step_batch(self, edges: list[tuple[Path, int]]) -> list[Transition]:
        paths = [(*state, self.actions(state)[action]) for state, action in edges]
        self._step_paths(paths)  # only the children of nodes with too many actions to prefetch
        fresh = [p for p in dict.fromkeys(paths) if p not in self.useful and not self.nodes[p].observation.done]
        self._open(fresh)
        return [self._transition(state, path) for (state, _), path in zip(edges, paths, strict=True)]

    def step(self, state: Path, action: int) -> Transition:
        (transition,) = self.step_batch([(state, action)])
        return transition

    def _transition(self, state: Path, path: Path) -> Transition:
        result = self.nodes[path]
        reward = self.rewards[path]
        if result.state_key == self.nodes[state].state_key:
            # Nothing changed: a self-loop that only burns a step, so search treats it as a dead end
            # that costs `noop_penalty` (terminal, so it never looks better than stopping early).
            return Transition(path, min(reward, -self.noop_penalty), True, None, 0, None)
        if self.revisit_penalty and self._visited_before(path):
            reward -= self.revisit_penalty
        done = result.observation.done
        # The depth is part of the key: equal states at equal depth merge, and a state reached again
        # deeper down (walking back) is a new node rather than a cycle in the tree.
        return Transition(path, reward, done, (len(path), result.state_key),
                          0 if done else len(self.useful[path]), None if done else self._template_ids(path))

    def evaluate(self, states: Sequence[Path]) -> Evaluation:
        values = np.zeros(len(states))
        logits: list[np.ndarray] | None = None
        if self.policy is not None:

            # Each state as the learner saw it in training (`state_text`: feedback, room, inventory; and
            # `candidate_text`: the candidates marked where they lead back to a visited state).
            inputs = [(*state_text(self.nodes[s].observation, self.notes_at(s)), *self.candidates(s)) for s in states]
            logits, policy_values = self.policy(inputs)
            values = (1.0 - self.value_mix) * np.asarray(policy_values, dtype=np.float64)
        if self.root_bonus is not None and () in states:
            # Advice from outside θ (memories, an LLM) tilts the root's priors; it never removes a candidate.
            at = list(states).index(())
            logits = logits or [np.zeros(len(self.useful[s])) for s in states]
            logits[at] = with_logit_bonus(logits[at], self.root_bonus)
        if self.value_mix > 0 and self.rollout_depth > 0:
            probes = []
            for s in states:
                self._rollouts += 1
                probes.append(sandbox_pb2.Probe(actions=s, rollout_depth=self.rollout_depth,
                                                rollout_seed=self.seed * 1_000_003 + self._rollouts))
            returns = np.array([r.rollout_return for r in self._simulate(probes)])
            values = values + self.value_mix * self.rollout_scale * returns
        return Evaluation(logits, values)
