"""EnvHost: one environment and its session state, as a worker process runs it.

Pure of transports (the worker process and the gRPC service wrap it), so it is tested directly.
Real steps build full `Transition`s, each carrying the bounded digest of the episode before it (the
session keeps the whole `EpisodeLog`); search-time probes (`simulate`) replay action paths from the
session's current state, reusing where the environment already is: a probe that extends the path
the environment stands on steps only the suffix, anything else restores the root (natively where the
environment can, else reset + replay) and steps the path. Stepped paths are cached, so probing a
known path again costs no environment step. Given a time budget, `simulate` answers the probes it has time for.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import PermissionDenied
from evoskill.core.reward.history import EpisodeLog
from evoskill.core.rollout import READ_ONLY_TEMPLATES, Rollout, rollout
from evoskill.core.state_key import state_key
from evoskill.envs import InvalidActionError, Snapshot, TextEnv, make_env
from evoskill.sandbox.v1 import sandbox_pb2

FailureKind = common_pb2.FailureKind
PROBE_S_DECAY = 0.7  # weight of the past in `probe_s`
def _path_seed(seed: int, path: tuple[str, ...]) -> int:
    """Deterministic across processes (Python's str hash is salted per process)."""
    digest = hashlib.blake2b("\x1f".join((str(seed), *path)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _reported(env: TextEnv) -> common_pb2.Failure | None:
    last_failure = getattr(env, "last_failure", None)
    return last_failure() if callable(last_failure) else None


@dataclass
class Faults:
    """Injected failures (seed 000 §5.4): the tool fails or times out without touching the env."""

    error_probability: float = 0.0
    timeout_probability: float = 0.0

    def draw(self, rng: random.Random) -> common_pb2.Failure | None:
        u = rng.random()
        if u < self.error_probability:
            return common_pb2.Failure(kind=FailureKind.FAILURE_KIND_EXTERNAL_ERROR, injected=True,
                                      message="injected tool failure")
        if u < self.error_probability + self.timeout_probability:
            return common_pb2.Failure(kind=FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT, injected=True,
                                      message="injected tool timeout")
        return None


@dataclass
class EnvHost:
    env: TextEnv
    env_spec: str
    episode_id: str = ""
    faults: Faults = field(default_factory=Faults)
    read_only: bool = False
    seed: int = 0
    cache_size: int = 4096
    history: EpisodeLog = field(default_factory=EpisodeLog)  # the real steps so far, reset text first
    steps: int = 0  # real steps taken
    _root: Snapshot | None = None
    _at: tuple[str, ...] | None = None  # path (from the root) the env stands on during search
    _cache: LRUCache[tuple[str, ...], sandbox_pb2.ProbeResult] = field(init=False)  # path -> its probe, cache_size
    _rng: random.Random = field(default_factory=random.Random)
    probe_s: float = 0.0  # a probe's recent time (moving average): what the next call's first one is expected to take

    def __post_init__(self) -> None:
        self._cache = LRUCache(self.cache_size)

    @classmethod
    def open(cls, spec: str, seed: int, fold: str, episode_id: str = "", faults: Faults | None = None,
             read_only: bool = False, gold_path: bool = True, cache_dir: str | None = None,
             limits: Mapping[str, Any] | None = None) -> tuple[EnvHost, common_pb2.Observation]:
        """``limits`` (step_timeout_s, memory_mb) go to an env with an ``apply_limits`` hook: one whose tools run
        in processes of their own fits their calls into a step and their memory under the worker's cap."""
        env = make_env(spec, strict=True, gold_path=gold_path, cache_dir=cache_dir)
        apply_limits = getattr(env, "apply_limits", None)
        if limits and callable(apply_limits):
            apply_limits(**limits)
        host = cls(env, spec, episode_id, faults or Faults(), read_only, seed)
        return host, host.reset(seed, fold)

    # -- real play --------------------------------------------------------------------------------
    def reset(self, seed: int, fold: str) -> common_pb2.Observation:
        obs = self.env.reset(seed, fold)
        self._rng = random.Random(seed)
        self.history, self.steps = EpisodeLog.start(obs.text), 0
        self._new_root()
        return obs

    def _new_root(self) -> None:
        self._root, self._at = None, ()
        self._cache.clear()

    def templates(self, actions: list[str]) -> list[str]:
        return [self.env.template(a) for a in actions]

    def check_action(self, action: str) -> None:
        if self.read_only and self.env.template(action) not in READ_ONLY_TEMPLATES:
            raise PermissionDenied(f"read-only mode: {action!r} may change the world")

    def step(self, action: str) -> common_pb2.Transition:
        """One real step; the env is in the session's state afterwards."""
        self.check_action(action)
        self._restore_root()
        before = self.env.observation()
        failure = self.faults.draw(self._rng)
        transition = self._transition(before, action, failure, self.steps, self.history)
        if not transition.failure.injected:  # an injected failure never ran the action
            self.history.record(action, transition.after.text)
        self.steps += 1
        self._new_root()
        return transition

    def _transition(self, before: common_pb2.Observation, action: str, failure: common_pb2.Failure | None,
                    index: int, history: EpisodeLog) -> common_pb2.Transition:
        template = self.env.template(action)
        if failure is None:
            after, reward = self.env.step(action)  # InvalidActionError names the action
            # An env that reports failures of its own (a tool that timed out or crashed) says so: the step ran.
            failure = _reported(self.env) or common_pb2.Failure(kind=FailureKind.FAILURE_KIND_NONE)
        else:
            after, reward = common_pb2.Observation(), 0.0
            after.CopyFrom(before)
            after.text = f"{failure.message}: {action}"
        return common_pb2.Transition(
            episode_id=self.episode_id, step_index=index, env_spec=self.env_spec,
            before=before, action=common_pb2.Action(text=action, template=template), after=after,
            env_reward=reward, failure=failure, history=history.digest(),
        )

    # -- search -----------------------------------------------------------------------------------
    def _restore_root(self) -> None:
        if self._at == ():
            return
        assert self._root is not None, "search moved the env without a root snapshot"
        self.env.restore(self._root)
        self._at = ()

    def _goto(self, path: tuple[str, ...]) -> int:
        """Stand on `path`; returns the env steps it cost."""
        if self._root is None:
            self._root = self.env.snapshot()
        assert self._at is not None
        if path[: len(self._at)] != self._at:
            self.env.restore(self._root)
            self._at = ()
        steps = 0
        for action in path[len(self._at):]:
            self.env.step(action)
            steps += 1
        self._at = path
        return steps

    def simulate(self, probes: list[sandbox_pb2.Probe], gamma: float,
                 budget_s: float | None = None) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        """The probes' results in order, the env steps they cost. Anytime with `budget_s`: a probe is started
        only while one is expected to fit in what is left (the longest of this call, and the recent probes'
        average across calls), so fewer results may come back. The root's state (a probe of no action and no
        rollout) is read whatever the estimate: no agent can act without it, and it costs a restore at most,
        where the average is of replays and rollouts: under load, with that average past the caller's deadline, a
        step's root would go unread and the episode end."""
        results, steps, started, longest = [], 0, time.monotonic(), 0.0
        for probe in probes:
            began = time.monotonic()
            root = not probe.actions and not probe.rollout_depth
            if budget_s is not None and not root and began + max(longest, self.probe_s) > started + budget_s:
                break
            result, cost = self._probe(tuple(probe.actions), probe.rollout_depth, probe.rollout_seed, gamma)
            results.append(result)
            steps += cost
            took = time.monotonic() - began
            longest, self.probe_s = max(longest, took), PROBE_S_DECAY * self.probe_s + (1 - PROBE_S_DECAY) * took
        return results, steps

    def _probe(self, path: tuple[str, ...], depth: int, seed: int, gamma: float) -> tuple[sandbox_pb2.ProbeResult, int]:
        cost = 0
        cached = self._cache.get(path)  # the most recently used now
        if cached is not None:
            result = sandbox_pb2.ProbeResult()
            result.CopyFrom(cached)
        else:
            result, cost = self._step_path(path, seed)
        if depth > 0 and not result.observation.done and not self._unchanged(path, result):
            if self._at != path:
                cost += self._goto(path)
            played = self._rollout(depth, seed, gamma)
            result.rollout_return, result.rollout_steps = played.total, len(played.taken)
            result.rollout_outcome, result.rollout_final_score = played.outcome, played.final_score
            cost += len(played.taken)
        return result, cost

    def _unchanged(self, path: tuple[str, ...], result: sandbox_pb2.ProbeResult) -> bool:
        """The path's last action left the state as it was (a no-op, which search treats as a dead end: no
        rollout), as far as the cache knows the state before it."""
        before = self._cache.get(path[:-1]) if path else None
        return before is not None and before.state_key == result.state_key

    def _step_path(self, path: tuple[str, ...], seed: int) -> tuple[sandbox_pb2.ProbeResult, int]:
        if not path:
            cost = self._goto(())
            obs = self.env.observation()
            result = sandbox_pb2.ProbeResult(observation=obs, state_key=state_key(obs))
        else:
            for action in path:
                self.check_action(action)
            cost = self._goto(path[:-1])
            before = self.env.observation()
            failure = self.faults.draw(random.Random(_path_seed(seed, path))) if self._faulty else None
            # The simulated path is part of the episode's history too (loops and novelty inside search).
            walked = [(path[k - 1], self._cache[path[:k]].observation.text if path[:k] in self._cache else "")
                      for k in range(1, len(path))]
            transition = self._transition(before, path[-1], failure, self.steps + len(path) - 1,
                                          self.history.extended(walked))
            self._at = path if failure is None else path[:-1]
            cost += 1 if failure is None else 0
            obs = transition.after
            result = sandbox_pb2.ProbeResult(transition=transition, observation=obs, state_key=state_key(obs))
        result.templates.extend(self.templates(list(result.observation.valid_actions)))
        self._cache[path] = result  # beyond cache_size, the least recently used goes
        out = sandbox_pb2.ProbeResult()
        out.CopyFrom(result)
        return out, cost

    @property
    def _faulty(self) -> bool:
        return self.faults.error_probability + self.faults.timeout_probability > 0

    def _rollout(self, depth: int, seed: int, gamma: float) -> Rollout:
        """The search's rollout (core.rollout) from where the env stands; the env stays at its end."""
        assert self._at is not None
        played = rollout(self.env, depth, gamma, seed)
        self._at = (*self._at, *played.taken)
        return played

    def close(self) -> None:
        self.env.close()


__all__ = ["EnvHost", "Faults", "InvalidActionError"]
