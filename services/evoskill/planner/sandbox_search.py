"""One sandbox session as the search core's environment and evaluator (mctx style: plain callables).

A search state is the path of actions from the session's current state. Stepping an edge asks the
sandbox (`Simulate`) for the child; when a node is first entered, all its children are stepped in one
call if there are at most `prefetch_children` of them, and their dense rewards come from the reward
service in one `ScoreBatch`. Leaf values mix the policy's value with the return of a random rollout
the sandbox runs next to the environment (one `Simulate` per batch of leaves).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evoskill.core.search import Evaluation, Root, Transition
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.v1 import sandbox_pb2

Path = tuple[str, ...]
# (goal, observation, actions, templates) per state -> (logits per state, values)
PolicyFn = Callable[[Sequence[tuple[str, str, Sequence[str], Sequence[str]]]], tuple[list[np.ndarray], np.ndarray]]


@dataclass
class SandboxSearch:
    sandbox: Any  # SandboxServiceStub over a blocking channel
    reward: Any  # RewardServiceStub over a blocking channel
    session_id: str
    gamma: float = 0.97
    rollout_depth: int = 10
    value_mix: float = 1.0
    prefetch_children: int = 32
    noop_penalty: float = 1.0
    policy: PolicyFn | None = None
    seed: int = 0
    nodes: dict[Path, sandbox_pb2.ProbeResult] = field(default_factory=dict)
    rewards: dict[Path, float] = field(default_factory=dict)
    template_ids: dict[str, int] = field(default_factory=dict)
    env_steps: int = 0
    _rollouts: int = 0

    def _simulate(self, probes: list[sandbox_pb2.Probe]) -> list[sandbox_pb2.ProbeResult]:
        reply = self.sandbox.Simulate(
            sandbox_pb2.SimulateRequest(session_id=self.session_id, probes=probes, gamma=self.gamma)
        )
        self.env_steps += reply.env_steps
        return list(reply.results)

    def _templates(self, result: sandbox_pb2.ProbeResult) -> list[int]:
        return [self.template_ids.setdefault(t, len(self.template_ids)) for t in result.templates]

    def root(self) -> Root:
        (result,) = self._simulate([sandbox_pb2.Probe()])
        self.nodes[()] = result
        return Root((), len(result.observation.valid_actions), (0, result.state_key), self._templates(result))

    def actions(self, path: Path) -> Sequence[str]:
        return self.nodes[path].observation.valid_actions

    def _expand(self, parent: Path, action: str) -> None:
        siblings = self.actions(parent)
        wanted = list(siblings) if len(siblings) <= self.prefetch_children else [action]
        paths = [(*parent, a) for a in wanted if (*parent, a) not in self.nodes]
        results = self._simulate([sandbox_pb2.Probe(actions=p) for p in paths])
        scored = self.reward.ScoreBatch(reward_pb2.ScoreBatchRequest(transitions=[r.transition for r in results]))
        for path, result, breakdown in zip(paths, results, scored.results, strict=True):
            self.nodes[path] = result
            self.rewards[path] = breakdown.total

    def step(self, state: Path, action: int) -> Transition:
        path = (*state, self.actions(state)[action])
        if path not in self.nodes:
            self._expand(state, path[-1])
        result = self.nodes[path]
        obs = result.observation
        if result.state_key == self.nodes[state].state_key:
            # Nothing changed (inventory, look, closing a closed door): in a deterministic world such an
            # edge is a self-loop that only burns a step, so search treats it as a dead end that costs
            # `noop_penalty` (terminal, so it can never look better than stopping early).
            return Transition(path, min(self.rewards[path], -self.noop_penalty), True, None, 0, None)
        # The depth is part of the key: actions that change nothing (inventory, look) would otherwise be
        # edges back to an ancestor, and a cycle in the tree; equal states at equal depth still merge.
        return Transition(path, self.rewards[path], obs.done, (len(path), result.state_key),
                          0 if obs.done else len(obs.valid_actions), self._templates(result))

    def evaluate(self, states: Sequence[Path]) -> Evaluation:
        values = np.zeros(len(states))
        logits: list[np.ndarray] | None = None
        if self.policy is not None:
            inputs = [(self.nodes[s].observation.goal, self.nodes[s].observation.text,
                       list(self.nodes[s].observation.valid_actions), list(self.nodes[s].templates)) for s in states]
            logits, policy_values = self.policy(inputs)
            values = (1.0 - self.value_mix) * np.asarray(policy_values, dtype=np.float64)
        if self.value_mix > 0 and self.rollout_depth > 0:
            probes = []
            for s in states:
                self._rollouts += 1
                probes.append(sandbox_pb2.Probe(actions=s, rollout_depth=self.rollout_depth,
                                                rollout_seed=self.seed * 1_000_003 + self._rollouts))
            returns = np.array([r.rollout_return for r in self._simulate(probes)])
            values = values + self.value_mix * returns
        return Evaluation(logits, values)
