"""The search's environment model (mctx's `recurrent_fn`): a sandbox session seen through `simulate`,
its steps scored in-process, given to `search` as plain callables.

A search state is the path of actions from the session's current state. `simulate(probes, gamma) ->
(results, env_steps)` is what the sandbox's `Simulate` answers (`EnvHost.simulate` in-process): each probe
steps a path from the session's state and may roll out after it. `score` is the reward service's own
function (`core.reward.Scorer`), called here without a round trip: `score.total(transition)` for the edges
search takes, `score.rollout(...)` for the rollouts. The model owns:

- pruning: when a node is created, its children are stepped in one `simulate` if there are at most
  `prefetch_children` of them (the root's however many, unless prefetch_children is 0), and the actions
  whose child is the same state (`core.state_key`) are dropped (and, with `prune_losses`, those whose child
  ends the episode lost at once): in a deterministic world such an edge is
  a self-loop that only burns a step (inventory, look, closing a closed door). Where all are no-ops they
  stay, each a dead end costing `noop_penalty`. The new nodes of one search round share one call
  (`step_batch`).
- revisit shaping: an edge into a state the episode (`visited`) or the path has been in costs
  `revisit_penalty`, so that undoing an action (close after open, walking back) never pays for itself.
- curiosity (`curiosity_weight` > 0 and θ's dynamics model given as `dynamics`): a stepped edge's reward
  gains weight × the model's surprise at (parent observation, action) -> the child's observation, an
  intrinsic reward toward what θ's experience does not predict; computed in one numpy call per `simulate`
  (`DynamicsWeights.surprise`), kept in `surprise`. Off (the default), the rewards are the scorer's alone.
- transposition keys: (depth, state key). Equal states at equal depth merge; a state reached again deeper
  down is a new node, so the tree never has a cycle.
- leaf values: (1 - value_mix) * the advised value + value_mix * the return of the one rollout
  (`core.rollout`), which the sandbox runs next to the environment, in the probe that steps the leaf's edge
  (one restore of a replay-only environment for both). With a `rollout_policy` (the LLM, `llm.rollout_steps`),
  a leaf's rollout takes the steps it chooses first, each one probe (the states kept as nodes), and the
  sandbox's random rollout plays the rest of `rollout_depth`; one return, valued the same way.
- time: `simulate` may answer only the first of its probes (the sandbox's `Simulate` is anytime, within the
  call's deadline); the model then says `timed_out`, answers None for the edges left unstepped and raises
  `SearchOutOfTime` for missing rollouts, and `search` returns what it has (never a made-up value).
- one reward scale, the reward service's: edges are its totals (and the shaping above, in its units), a
  rollout is valued by `Scorer.rollout` (its score gain weighted as the score_gain term, a win or a loss as
  the last step of an episode), and θ's value head regresses returns of the same totals (`core.learn.data`).
- priors: uniform, then each of `advice` in order (`core.search.advice`: θ, memories, an LLM).
- the LLM at expansion (`propose`, core/llm): asked when a node is created (the planner decides which), once
  its children are stepped and its no-ops dropped, it ranks the node's candidates and may propose new
  actions; the new ones are stepped at once, those the environment refuses are dropped (`rejected`), the
  others that change something join the node's candidates (`listed`), and its ranking is the node's LLM
  prior (`ranked`, read by `core.search.advice.llm_priors`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput
from evoskill.core.exploration import curiosity_changed
from evoskill.core.llm.prompt import LlmAnswer
from evoskill.core.reward import Scorer
from evoskill.core.reward.dynamics import DynamicsWeights
from evoskill.core.rollout import READ_ONLY_TEMPLATES
from evoskill.core.rooms import RoomMap, room_of
from evoskill.core.search.mcts import SearchOutOfTime, search
from evoskill.core.search.result import SearchResult
from evoskill.core.search.types import Evaluation, Root, Transition
from evoskill.core.search_config import SearchConfig
from evoskill.core.state_text import candidate_text, notes_along, scored_before
from evoskill.sandbox.v1 import sandbox_pb2

Path = tuple[str, ...]
# A transform of evaluations (θ, memories, the LLM, visit counts): the model, the paths evaluated, the evaluation so
# far -> the evaluation with this advice applied (core/search/advice.py has them).
Advice = Callable[["SearchModel", Sequence[Path], Evaluation], Evaluation]
SimulateFn = Callable[[list[sandbox_pb2.Probe], float], tuple[Sequence[sandbox_pb2.ProbeResult], int]]
ProposeFn = Callable[["SearchModel", Path], LlmAnswer | None]  # None: not asked at this node
# (model, states, the search's own values) -> the values used
JudgeFn = Callable[["SearchModel", Sequence[Path], np.ndarray], np.ndarray]
# (model, a rollout's state, its step k) -> the action the rollout takes there; None: the rest is random
RolloutFn = Callable[["SearchModel", Path, int], "str | None"]
ROLLOUT_SEED_STRIDE = 1_000_003  # rollout seeds of different searches never meet


@dataclass
class SearchModel:
    simulate: SimulateFn
    score: Scorer
    config: SearchConfig = field(default_factory=SearchConfig)
    visited: frozenset[str] = frozenset()  # state keys the episode has been in (before this search)
    notes: str = ""  # what the episode has read so far (θ's state text carries it)
    advice: list[Advice] = field(default_factory=list)
    rooms: RoomMap = field(default_factory=RoomMap)  # the rooms the episode has walked through (core/rooms.py)
    taken: tuple[str, ...] = ()  # the episode's last actions (≤ state_text.MAX_RECENT), oldest first
    scored: tuple[str, ...] = ()  # the episode's actions that raised the score, in order
    nodes: dict[Path, sandbox_pb2.ProbeResult] = field(default_factory=dict)
    rewards: dict[Path, float] = field(default_factory=dict)
    useful: dict[Path, list[str]] = field(default_factory=dict)  # the actions search considers per node
    template_ids: dict[str, int] = field(default_factory=dict)
    env_steps: int = 0
    env_seconds: float = 0.0  # waited on `simulate`: the environment's share of the search's time
    cancelled: Callable[[], bool] | None = None  # asked before each round (see core.search.mcts)
    timed_out: bool = False  # a `simulate` answered fewer probes than it was sent: the search's time is up
    propose: ProposeFn | None = None  # the LLM at expansion
    judge: JudgeFn | None = None  # the LLM's view of each evaluated state's value (llm.value_weight)
    rollout_policy: RolloutFn | None = None  # chooses the first steps of each leaf's rollout (llm.rollout_steps)
    rollout_workers: int = 1  # leaves whose guided rollouts run at once (the LLM's llm.concurrency)
    proposed: dict[Path, list[str]] = field(default_factory=dict)  # its new actions the environment took, per node
    ranked: dict[Path, list[str]] = field(default_factory=dict)  # its choices per node, best first
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (its action, why the environment refused it)
    dynamics: DynamicsWeights | None = None  # θ's dynamics model, for the curiosity bonus
    surprise: dict[Path, float] = field(default_factory=dict)  # its surprise per stepped edge (curiosity on)
    _rollouts: int = 0
    _stepping: threading.Lock = field(default_factory=threading.Lock)  # guided rollouts in threads step one at a time
    _rolled: dict[Path, float] = field(default_factory=dict)  # rollout values that came with a path's step

    def run(self) -> SearchResult:
        """One search from the session's state, with this model as its environment and evaluator."""
        return search(self.root(), self.step, self.config, self.evaluate, step_batch=self.step_batch,
                      cancelled=self.cancelled)

    # -- the state space ------------------------------------------------------------------------------
    def root(self) -> Root:
        if () not in self.nodes:
            answered = self._simulate([sandbox_pb2.Probe()])
            if not answered:
                raise SearchOutOfTime("no time left to read the search's root")
            self.nodes[()] = answered[0]
            self._open([()])
        return Root((), len(self.useful[()]), self.key(()), self._template_ids(()))

    def key(self, path: Path) -> tuple[int, str]:
        """The transposition key: the depth and the state's identity."""
        return len(path), self.nodes[path].state_key

    def observation(self, path: Path) -> common_pb2.Observation:
        return self.nodes[path].observation

    def actions(self, path: Path) -> Sequence[str]:
        """The actions search considers at `path` (no-ops dropped); index i is the core's action i."""
        return self.useful[path]

    def listed(self, path: Path) -> list[str]:
        """Every candidate at `path`: the environment's valid actions, then the LLM's new ones it took."""
        return [*self.nodes[path].observation.valid_actions, *self.proposed.get(path, ())]

    def templates(self, path: Path, actions: Sequence[str] | None = None) -> list[str]:
        """The template (skill) of each action (default: the ones search considers) at `path`; a proposed
        action's is the one its step reported."""
        result = self.nodes[path]
        by_action = dict(zip(result.observation.valid_actions, result.templates, strict=True))
        return [by_action[a] if a in by_action else self.nodes[(*path, a)].transition.action.template
                for a in (self.useful[path] if actions is None else actions)]

    def notes_at(self, path: Path) -> str:
        """The notes at `path`: the episode's, replaced by a document read on the way."""
        return notes_along(self.notes, path, [self.nodes[path[:k + 1]].observation.text for k in range(len(path))])

    def seen(self, path: Path, actions: Sequence[str] | None = None) -> list[bool]:
        """Per action at `path` (default: the ones search considers): it leads to a state the episode or
        the path has been in; False where the child was never stepped (too many actions to prefetch)."""
        return [(*path, a) in self.nodes and self._visited_before((*path, a))
                for a in (self.useful[path] if actions is None else actions)]

    def recent_at(self, path: Path, k: int) -> tuple[str, ...]:
        """The last `k` actions at `path`: the episode's, then the path's own."""
        return (*self.taken, *path)[-k:] if k else ()

    def scored_at(self, path: Path) -> tuple[str, ...]:
        """The actions that raised the score at `path`: the episode's, then the path's own."""
        rose = [a for k, a in enumerate(path)
                if self.nodes[path[:k + 1]].observation.score > self.nodes[path[:k]].observation.score]
        return (*self.scored, *rose)

    def rooms_at(self, path: Path) -> RoomMap:
        """The episode's map of rooms with the path's own steps walked, as if they were real."""
        if not path:
            return self.rooms
        rooms = self.rooms.copy()
        for k in range(len(path)):
            before, after = self.nodes[path[:k]].observation, self.nodes[path[:k + 1]].observation
            rooms.learn(room_of(before), path[k], room_of(after))
        return rooms

    def candidates(self, path: Path, rooms: bool = False, scored: bool = False) -> tuple[list[str], list[str]]:
        """(texts θ reads, templates) of the actions search considers at `path`; with `rooms`, each marked
        with the known rooms it leads to (θ's NetConfig.room_marks); with `scored`, where an action of its
        kind raised the score before (NetConfig.scored_marks)."""
        actions = self.useful[path]
        leads = (self.rooms_at(path).leads(room_of(self.observation(path)), actions) if rooms
                 else [()] * len(actions))
        marks = scored_before(actions, self.scored_at(path)) if scored else [False] * len(actions)
        texts = [candidate_text(a, s, r, m) for a, s, r, m in zip(actions, self.seen(path), leads, marks, strict=True)]
        return texts, self.templates(path)

    def reward(self, path: Path) -> float:
        """The reward of the step into `path`, scored the first time search takes it."""
        reward = self.rewards.get(path)
        if reward is None:
            reward = self.score.total(self.nodes[path].transition)
            if self.curious:  # only then: with curiosity off the rewards stay the scorer's, bit for bit
                reward += self.config.curiosity_weight * self.surprise.get(path, 0.0)
            self.rewards[path] = reward
        return reward

    @property
    def curious(self) -> bool:
        """The curiosity bonus is on: a weight, and a dynamics model to be surprised."""
        return self.config.curiosity_weight > 0 and self.dynamics is not None

    def curiosity_chose(self, result: SearchResult) -> bool:
        """The curiosity bonus chose the root action `result` returns (`core.exploration.curiosity_changed`)."""
        if not self.curious:
            return False
        bonuses = [self.config.curiosity_weight * self.surprise.get((a,), 0.0) for a in self.actions(())]
        return curiosity_changed(result.q_values, np.asarray(bonuses), result.action)

    def losing(self, path: Path = ()) -> np.ndarray:
        """Per action search considers at `path`: its child was stepped and ends the episode lost at once."""
        return np.asarray([(*path, a) in self.nodes and self._loses((*path, a)) for a in self.useful[path]], bool)

    def safe_choice(self, order: Sequence[int], tries: int) -> int:
        """The first root action of `order` (most preferred first) not seen to lose at once, each one not stepped
        yet stepped now, up to `tries` of them: `prune_losses` at the real step. The root of a large node keeps
        its losers as candidates (its children are not prefetched), a sharp prior can give a child every visit
        after it was seen to lose, and a step taken on the prior alone was never looked at. An action left
        unstepped is not known to lose; where each one loses, order[0]."""
        stepped = 0
        for i in order:
            path = (self.useful[()][i],)
            if path not in self.nodes and stepped < tries:
                self._step_paths([path])
                stepped += 1
            if path not in self.nodes or not self._loses(path):
                return i
        return order[0]

    # -- `search`'s callables -------------------------------------------------------------------------
    def step_batch(self, edges: list[tuple[Path, int]]) -> list[Transition | None]:
        """The edges' transitions; None where the search's time ran out before the edge was stepped."""
        paths = [(*state, self.actions(state)[action]) for state, action in edges]
        # Only the children of nodes with too many actions to prefetch; each comes with its leaf's random
        # rollout, so that one restore of a replay-only environment serves both.
        self._step_paths(paths, rollouts=self._rollouts_on and self.rollout_policy is None)
        fresh = [p for p in dict.fromkeys(paths)
                 if p in self.nodes and p not in self.useful and not self.nodes[p].observation.done]
        self._open(fresh)
        return [self._transition(state, path) if path in self.nodes else None
                for (state, _), path in zip(edges, paths, strict=True)]

    def step(self, state: Path, action: int) -> Transition:
        (transition,) = self.step_batch([(state, action)])
        if transition is None:
            raise SearchOutOfTime("no time left to step the edge")
        return transition

    def advise(self, states: Sequence[Path]) -> Evaluation:
        """Priors and values from the advice alone (no rollouts): what θ alone acts on."""
        evaluation = Evaluation(None, np.zeros(len(states)))
        for advise in self.advice:
            evaluation = advise(self, states, evaluation)
        return evaluation

    def evaluate(self, states: Sequence[Path]) -> Evaluation:
        evaluation = self.advise(states)
        mix = self.config.value_mix
        values = (1.0 - mix) * np.asarray(evaluation.values, dtype=np.float64)
        if self._rollouts_on:
            values = values + mix * self._rollout_returns(states)
        if self.judge is not None:
            values = self.judge(self, states, values)
        return Evaluation(evaluation.logits, values)

    @property
    def _rollouts_on(self) -> bool:
        return self.config.value_mix > 0 and self.config.rollout_depth > 0

    # -- internals ------------------------------------------------------------------------------------
    def _simulate(self, probes: list[sandbox_pb2.Probe]) -> Sequence[sandbox_pb2.ProbeResult]:
        if not probes:
            return []
        started = time.perf_counter()
        results, steps = self.simulate(probes, self.config.gamma)
        self.env_seconds += time.perf_counter() - started
        self.env_steps += steps
        self.timed_out = self.timed_out or len(results) < len(probes)
        return results

    def _template_ids(self, path: Path) -> list[int]:
        return [self.template_ids.setdefault(t, len(self.template_ids)) for t in self.templates(path)]

    def _step_paths(self, paths: list[Path], rollouts: bool = False) -> None:
        """Step the paths not stepped yet (as many as time allows), in sorted order: a path right after its
        prefix, siblings together, so that the sandbox walks on rather than restores where it can."""
        paths = sorted(p for p in dict.fromkeys(paths) if p not in self.nodes)
        probes = [self._rollout_probe(p) if rollouts else sandbox_pb2.Probe(actions=p) for p in paths]
        for path, result in zip(paths, self._simulate(probes), strict=False):
            self.nodes[path] = result
            if result.rollout_steps:  # none after a no-op (a dead end) or where the path ends the game
                self._rolled[path] = self._rollout_value(result)
        self._note_surprise(paths)

    def _note_surprise(self, paths: list[Path]) -> None:
        """The dynamics model's surprise at each newly stepped edge, in one batched call."""
        if self.dynamics is None or not self.curious:
            return
        edges = [p for p in paths if p and p in self.nodes and p[:-1] in self.nodes and p not in self.surprise]
        if not edges:
            return
        transitions = [(self.nodes[p[:-1]].observation.text, p[-1], self.nodes[p].observation.text) for p in edges]
        self.surprise.update(zip(edges, self.dynamics.surprise(transitions).tolist(), strict=True))

    def _open(self, parents: list[Path]) -> None:
        """Step the children of new nodes (where few enough) and keep the actions that change something.
        The root's are stepped however many (one call a real step): θ reads which of its candidates lead
        back to a visited state in every state it was trained on, and a no-op left at the root (opening an
        open door) is what a greedy prior picks forever. Then the LLM is asked, with those candidates."""
        limit = self.config.prefetch_children
        valid = {p: list(self.nodes[p].observation.valid_actions) for p in parents}
        small = [p for p in parents if len(valid[p]) <= limit or (p == () and limit > 0)]
        self._step_paths([(*p, a) for p in small for a in valid[p]])
        # A node whose children the search's time did not cover keeps all its actions, as a large one does.
        small = [p for p in small if all((*p, a) in self.nodes for a in valid[p])]
        for parent in parents:
            actions = valid[parent]
            if parent in small:
                effective = [a for a in actions if self._changes((*parent, a))]
                actions = effective or actions  # all no-ops: keep them, each a dead end (see _transition)
                if self.config.prune_losses:
                    actions = [a for a in actions if not self._loses((*parent, a))] or actions
            self.useful[parent] = actions
        for parent in parents:
            self._ask(parent)

    def _ask(self, parent: Path) -> None:
        """The LLM's answer at a new node, which it reads with the node's candidates (no-ops dropped): its new
        actions stepped (each must be one the environment takes, and change something), its ranking kept for
        the node's prior."""
        answer = self.propose(self, parent) if self.propose is not None else None
        if answer is None:
            return
        valid = set(self.nodes[parent].observation.valid_actions)
        paths = [(*parent, a) for a in answer.new if a not in valid]
        try:
            self._step_paths(paths)
        except InvalidInput:  # one of them is not an action here: find which, one at a time
            for path in paths:
                try:
                    self._step_paths([path])
                except InvalidInput as exc:
                    self.rejected.append((path[-1], str(exc)))
        taken = [p for p in paths if p in self.nodes and self._changes(p)
                 and not (self.config.prune_losses and self._loses(p))]
        self.proposed[parent] = [p[-1] for p in taken]
        self.useful[parent] = [*self.useful[parent], *self.proposed[parent]]
        considered = set(self.useful[parent])
        self.ranked[parent] = [a for a in answer.ranked if a in considered]

    def _changes(self, path: Path) -> bool:
        """The last action of `path` changes the world's state or the notes: reading a document anew leaves
        the room as it was but not the agent (θ alone could never read the recipe otherwise)."""
        return (self.nodes[path].state_key != self.nodes[path[:-1]].state_key
                or self.notes_at(path) != self.notes_at(path[:-1]))

    def _loses(self, path: Path) -> bool:
        """The last action of `path` ends the episode lost, gaining nothing (cooking a meal the wrong way)."""
        after, before = self.nodes[path].observation, self.nodes[path[:-1]].observation
        return after.done and not after.won and after.score <= before.score

    def _visited_before(self, path: Path) -> bool:
        if self.notes_at(path) != self.notes_at(path[:-1]):
            return False  # the same room, but the agent knows more than it did there
        key = self.nodes[path].state_key
        return key in self.visited or any(self.nodes[path[:k]].state_key == key for k in range(len(path)))

    def _transition(self, state: Path, path: Path) -> Transition:
        result = self.nodes[path]
        reward = self.reward(path)
        if not self._changes(path):
            # Nothing changed: a self-loop that only burns a step, so search treats it as a dead end
            # that costs `noop_penalty` (terminal, so it never looks better than stopping early).
            return Transition(path, min(reward, -self.config.noop_penalty), True, None, 0, None)
        if self.config.revisit_penalty and self._visited_before(path):
            reward -= self.config.revisit_penalty
        done = result.observation.done
        return Transition(path, reward, done, self.key(path),
                          0 if done else len(self.useful[path]), None if done else self._template_ids(path))

    def _rollout_probe(self, path: Path, depth: int | None = None, seed: int | None = None) -> sandbox_pb2.Probe:
        return sandbox_pb2.Probe(actions=path, rollout_depth=self.config.rollout_depth if depth is None else depth,
                                 rollout_seed=self._rollout_seed() if seed is None else seed)

    def _rollout_seed(self) -> int:
        self._rollouts += 1
        return self.config.seed * ROLLOUT_SEED_STRIDE + self._rollouts

    def _rollout_value(self, result: sandbox_pb2.ProbeResult) -> float:
        return self.score.rollout(result.rollout_return - result.rollout_outcome, result.rollout_outcome,
                                  result.rollout_final_score)

    def rollout_candidates(self, path: Path) -> tuple[list[str], list[str]]:
        """(actions, templates) a rollout chooses from at `path`: the listed ones that may change the world (those
        that only read it cannot move a rollout towards anything), all of them where none may."""
        result = self.nodes[path]
        pairs = list(zip(result.observation.valid_actions, result.templates, strict=True))
        kept = [(a, t) for a, t in pairs if t not in READ_ONLY_TEMPLATES] or pairs
        return [a for a, _ in kept], [t for _, t in kept]

    def _rollout_returns(self, states: Sequence[Path]) -> np.ndarray:
        """Each state's rollout value: the one that came with its step, else a rollout now."""
        wanted = [s for s in dict.fromkeys(states) if s not in self._rolled]
        if (choose := self.rollout_policy) is not None:
            seeds = [self._rollout_seed() for _ in wanted]  # in order: the same seeds however the threads run
            workers = min(self.rollout_workers, len(wanted))
            if workers > 1:  # the policy's requests in flight together; each rollout's steps in order
                with ThreadPoolExecutor(workers, "rollout") as pool:
                    values = list(pool.map(lambda s, seed: self._guided_rollout(s, choose, seed), wanted, seeds))
            else:
                values = [self._guided_rollout(s, choose, seed) for s, seed in zip(wanted, seeds, strict=True)]
            self._rolled.update(zip(wanted, values, strict=True))
            return np.array([self._rolled[s] for s in states])
        results = self._simulate([self._rollout_probe(s) for s in wanted])
        if len(results) < len(wanted):
            raise SearchOutOfTime(f"time for {len(results)} of {len(wanted)} rollouts")
        self._rolled.update((s, self._rollout_value(r)) for s, r in zip(wanted, results, strict=True))
        return np.array([self._rolled[s] for s in states])

    def _guided_rollout(self, path: Path, choose: RolloutFn, seed: int) -> float:
        """The rollout from `path` with `rollout_policy` choosing its steps while it will (an action the environment
        refuses ends its part, recorded in `rejected`), then the sandbox's random rollout (`seed`) for the rest of
        `rollout_depth`; valued as a random one is (`Scorer.rollout`), discounted from `path`. Safe in threads:
        the policy is asked outside `_stepping`, the environment stepped inside it."""
        gain, outcome, discount, here = 0.0, 0.0, 1.0, path
        depth = self.config.rollout_depth
        for k in range(depth):
            if self.nodes[here].observation.done:
                break
            action = choose(self, here, k)
            if action is None:
                break
            try:
                with self._stepping:
                    self._step_paths([(*here, action)])
            except InvalidInput as exc:
                self.rejected.append((action, str(exc)))
                break
            if (*here, action) not in self.nodes:
                raise SearchOutOfTime("no time left for a rollout's step")
            here = (*here, action)
            after = self.nodes[here]
            gain += discount * after.transition.env_reward
            outcome += discount * (float(after.observation.won) - float(after.observation.lost))
            discount *= self.config.gamma
        left = depth - (len(here) - len(path))
        final = self.nodes[here].observation.score
        if left > 0 and not self.nodes[here].observation.done:
            with self._stepping:
                results = self._simulate([self._rollout_probe(here, left, seed)])
            if not results:
                raise SearchOutOfTime("no time left for a rollout")
            rest = results[0]
            gain += discount * (rest.rollout_return - rest.rollout_outcome)
            outcome += discount * rest.rollout_outcome
            final = rest.rollout_final_score if rest.rollout_steps else final
        return self.score.rollout(gain, outcome, final)
