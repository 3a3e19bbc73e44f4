"""Gold-path episodes straight from the environment adapters, in parallel worker processes.

Each worker holds one environment (an `EnvHost`, reused across episodes: a JVM start costs about a
second) and plays the planner's own episode runner with its "demo" agent (`EpisodePlayer`, `DemoAgent`)
against it in-process: the sandbox's and the reward service's calls are answered by the host and by the
reward service's own function (`Scorer`), so an episode made here is the one the stack records when it plays a
demonstration (the candidates' templates, their `seen` marks, the rewards), without a service in between.

`seen` marks need every child of every state stepped once; on environments without a native state
copy (TextWorldExpress, ScienceWorld) each child costs a replay of the episode so far. `seen=False`
skips that (children are not stepped; every mark reads False, as on states with more than
`search.prefetch_children` actions). ScienceWorld's games step none either way (its scheme's search settings,
`EnvScheme.search`: hundreds of children a state, each a replay).

`shorten` plays each gold path's shortened form instead (`core.shorten`: runs of one action replaced by one
command, steps the outcome does not need left out, each change checked by playing it from the start).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.util import Finalize
from typing import Any

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.agent import AgentKind
from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.core.reward import Scorer
from evoskill.core.shorten import shortened
from evoskill.core.state_key import normalise, state_key
from evoskill.envs import TextEnv
from evoskill.events.v1 import events_pb2
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import Settings
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.service import textworld_cache_dir
from evoskill.sandbox.v1 import sandbox_pb2

_CTX = mp.get_context("spawn")  # never fork a process that may hold gRPC's threads


class HostSandbox:
    """The sandbox calls the demo agent makes, answered in-process by one `EnvHost` (one session at a time;
    the host and its environment stay open across sessions of the same spec)."""

    def __init__(self, cache_dir: str | None = None, shorten: bool = False) -> None:
        self.cache_dir = cache_dir  # tw-make's games (the stack's own cache)
        self.shorten = shorten
        self.host: EnvHost | None = None
        self.env_steps = 0  # every environment step, the children stepped for `seen` included

    def CreateSession(self, request: sandbox_pb2.CreateSessionRequest, timeout: float = 0) -> sandbox_pb2.SessionReply:
        if self.host is None or self.host.env_spec != request.env_spec:
            self.close()
            self.host, obs = EnvHost.open(request.env_spec, request.seed, request.fold, request.episode_id,
                                          gold_path=request.gold_path, cache_dir=self.cache_dir)
        else:
            self.host.episode_id = request.episode_id
            obs = self.host.reset(request.seed, request.fold)
        gold = self.host.env.gold_path() or []
        if self.shorten and gold:
            env = self.host.env
            wanted, env.want_gold_path = env.want_gold_path, False  # the trials and the session have theirs now
            try:
                trials = GoldTrials(env, request.seed, request.fold)
                gold = shortened(gold, trials.outcome, trials.listed, trials.idle)
                self.env_steps += trials.env_steps
                obs = self.host.reset(request.seed, request.fold)
            finally:
                env.want_gold_path = wanted
        return sandbox_pb2.SessionReply(session_id=request.episode_id, episode_id=request.episode_id, observation=obs,
                                        gold_path=gold)

    def Step(self, request: sandbox_pb2.StepRequest) -> sandbox_pb2.StepReply:
        assert self.host is not None
        self.env_steps += 1
        return sandbox_pb2.StepReply(transition=self.host.step(request.action))

    def Simulate(self, request: sandbox_pb2.SimulateRequest, timeout: float | None = None) -> sandbox_pb2.SimulateReply:
        assert self.host is not None
        results, steps = self.host.simulate(list(request.probes), request.gamma or 1.0, timeout)
        self.env_steps += steps
        return sandbox_pb2.SimulateReply(results=results, env_steps=steps, partial=len(results) < len(request.probes))

    def CloseSession(self, request: sandbox_pb2.CloseSessionRequest) -> sandbox_pb2.CloseSessionReply:
        return sandbox_pb2.CloseSessionReply()

    def close(self) -> None:
        if self.host is not None:
            self.host.close()
            self.host = None


@dataclass
class GoldTrials:
    """`core.shorten`'s plays on `env`: from the game's start, each a reset and its actions, up to where the game
    ends; an action the environment refuses ends a trial unwon. A step is idle where the state after it is the
    state before (`state_key`) and its text is in what the agent read there (the room, the inventory, the last
    text): a look around, not a thermometer's reading. `env_steps` counts every step the trials took."""

    env: TextEnv
    seed: int
    fold: str
    env_steps: int = 0

    def _play(self, actions: Sequence[str]) -> Observation | None:
        obs: Observation | None = self.env.reset(self.seed, self.fold)
        for action in actions:
            if obs is None or obs.done:
                break
            obs = self._step(action)
        return obs

    def _step(self, action: str) -> Observation | None:
        self.env_steps += 1
        try:
            return self.env.step(action)[0]
        except (InvalidInput, FailedPrecondition):
            return None

    def outcome(self, actions: Sequence[str]) -> tuple[bool, float]:
        obs = self._play(actions)
        return (False, 0.0) if obs is None else (bool(obs.won), float(obs.score))

    def listed(self, prefix: Sequence[str]) -> Sequence[str]:
        obs = self._play(prefix)
        return [] if obs is None or obs.done else list(obs.valid_actions)

    def idle(self, path: Sequence[str], i: int) -> bool:
        before = self._play(path[:i])
        if before is None or before.done:
            return False
        after = self._step(path[i])
        if after is None:
            return False
        read = " ".join(normalise(t) for t in (before.look, before.inventory, before.text))
        return state_key(after) == state_key(before) and normalise(after.text) in read


class LocalReward:
    """The reward service's Score, in-process: the same function with the same settings (core.reward.Scorer)."""

    def __init__(self, settings: Settings) -> None:
        self.scorer = Scorer.for_settings(settings)

    def Score(self, request: reward_pb2.ScoreRequest) -> reward_pb2.RewardBreakdown:
        return self.scorer(request.transition)


def episode_id(spec: str, fold: str, seed: int) -> str:
    """Deterministic: generating the same game again stores nothing new (replay is idempotent by id)."""
    return f"demo:{spec}:{fold}:{seed}"


@dataclass
class DemoPlayer:
    """Plays gold paths of one spec and fold, one episode after another, on one environment."""

    settings: Settings
    seen: bool = True
    max_steps: int = 1000
    shorten: bool = False
    sandbox: HostSandbox = field(init=False)

    def __post_init__(self) -> None:
        self.sandbox = HostSandbox(textworld_cache_dir(self.settings), self.shorten)
        search = self.settings.search if self.seen else self.settings.search.model_copy(
            update={"prefetch_children": 0})
        self.search_settings = search
        self.reward = LocalReward(self.settings)

    def play(self, spec: str, fold: str, seed: int) -> tuple[events_pb2.EpisodeCompleted, int]:
        """The episode, and the environment steps it cost (the children stepped for `seen` included)."""
        before = self.sandbox.env_steps
        player = EpisodePlayer(self.sandbox, self.reward, self.search_settings, self.reward.scorer)
        request = planner_pb2.PlayEpisodeRequest(env_spec=spec, seed=seed, fold=fold, max_steps=self.max_steps,
                                                 episode_id=episode_id(spec, fold, seed),
                                                 config=planner_pb2.SearchConfig(agent=AgentKind.DEMO))
        for _ in player.play(request):
            pass
        return player.completed, self.sandbox.env_steps - before

    def close(self) -> None:
        self.sandbox.close()


_WORKER: DemoPlayer | None = None


def _init_worker(settings_json: str, seen: bool, max_steps: int, shorten: bool) -> None:
    global _WORKER
    _WORKER = DemoPlayer(Settings.model_validate_json(settings_json), seen, max_steps, shorten)
    Finalize(None, _WORKER.close, exitpriority=10)  # the JVM goes with the worker


def _play_in_worker(job: tuple[str, str, int]) -> tuple[bytes, int]:
    assert _WORKER is not None
    episode, steps = _WORKER.play(*job)
    return episode.SerializeToString(), steps


def unlisted_steps(episode: events_pb2.EpisodeCompleted) -> int:
    """The episode's steps whose action is not among the step's valid actions as the environment listed them.
    θ and search choose among the listed actions only, so no agent is ever offered such a step's action:
    ScienceWorld's list is incomplete, and its gold paths take actions it accepts but does not list ("pick up
    seed jar" in grow-plant, where the list names "pick up seed plant in seed jar"). A step with no list at all
    (a tool call an LLM writes) is not counted."""
    return sum(bool(step.target.actions) and step.action.text not in step.target.actions for step in episode.steps)


@dataclass
class Throughput:
    episodes: int = 0
    won: int = 0
    steps: int = 0  # real steps (the gold path's)
    unlisted: int = 0  # of them, steps whose action the environment's valid-action list did not name (`unlisted_steps`)
    env_steps: int = 0  # every environment step, the children stepped for `seen` included
    seconds: float = 0.0

    def add(self, episode: events_pb2.EpisodeCompleted, env_steps: int) -> None:
        self.episodes += 1
        self.won += episode.won
        self.steps += len(episode.steps)
        self.unlisted += unlisted_steps(episode)
        self.env_steps += env_steps

    def to_json(self) -> dict[str, Any]:
        per_s = 1 / self.seconds if self.seconds > 0 else 0.0  # no time measured (a reused library): no rates
        return {"episodes": self.episodes, "won": self.won, "steps": self.steps, "unlisted": self.unlisted,
                "env_steps": self.env_steps,
                "seconds": self.seconds, "episodes_per_s": self.episodes * per_s, "steps_per_s": self.steps * per_s,
                "env_steps_per_s": self.env_steps * per_s}


def generate(spec: str, fold: str, seeds: Sequence[int], *, workers: int = 1, seen: bool = True, max_steps: int = 1000,
             settings: Settings | None = None, throughput: Throughput | None = None, shorten: bool = False,
             ) -> Iterator[events_pb2.EpisodeCompleted]:
    """Gold-path episodes of `spec` on `fold` for `seeds`, in seed order; `throughput` is filled as they come
    (its clock includes the workers' start, JVMs included)."""
    settings = settings or Settings()
    tally = throughput if throughput is not None else Throughput()
    started = time.perf_counter()
    jobs = [(spec, fold, seed) for seed in seeds]
    if workers <= 1:
        player = DemoPlayer(settings, seen, max_steps, shorten)
        try:
            for job in jobs:
                episode, steps = player.play(*job)
                tally.add(episode, steps)
                tally.seconds = time.perf_counter() - started
                yield episode
        finally:
            player.close()
        return
    chunk = max(1, min(16, len(jobs) // (workers * 4)))
    pool = ProcessPoolExecutor(workers, mp_context=_CTX, initializer=_init_worker,
                               initargs=(settings.model_dump_json(), seen, max_steps, shorten))
    try:
        for payload, steps in pool.map(_play_in_worker, jobs, chunksize=chunk):
            episode = events_pb2.EpisodeCompleted.FromString(payload)
            tally.add(episode, steps)
            tally.seconds = time.perf_counter() - started
            yield episode
    finally:
        pool.shutdown(cancel_futures=True)  # a consumer that stops early does not wait for the rest
