"""θ with its replay, checkpoint and registry under `<state_dir>/learner/`: the learner's blocking half.

    replay.sqlite     every ingested episode (MixedReplay: durable, idempotent by episode id)
    checkpoint.pt     network, optimiser, skill vocabulary, step and version counters
    weights/          v000001.pt, ...: the checkpoint as each version was published (the last
                      `learner.kept_weights`), so a Train can start again from a published θ (`from_version`)
    policies/         policy-v000001.onnx, ... and index.json (see `registry`)

Only episodes of `learner.train_folds` are training data: an evaluation's dev/test episode is skipped
(remembered by id, so a Train that names it says why it is not in replay). A restart rebuilds replay
from sqlite and continues from the checkpoint, and version numbers keep increasing past whatever the
registry lists. Every method blocks: the service calls them in threads.
"""

from __future__ import annotations

import shutil
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from evoskill.core.agent import AgentKind
from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.core.learn import Learner, MixedReplay, TextEncoder, TokenFeaturizer, TrainConfig, featurizer_from_spec
from evoskill.core.learn.export import OnnxPolicy, unfit
from evoskill.events.v1 import events_pb2
from evoskill.learner.registry import PolicyEntry, PolicyRegistry, feature_cache_dir, parse_version, version_name
from evoskill.platform.config import Settings
from evoskill.platform.provenance import run_record

Ingested = Literal["stored", "duplicate", "other_fold"]
# Registry metrics that are not losses: the rest of a version's metrics are its TrainReply.losses.
BOOKKEEPING = ("steps", "samples", "replay_size", "replay_episodes", "total_steps", "skipped_steps")
SKIPPED_REMEMBERED = 10_000  # ids of skipped episodes kept to explain a Train naming one


def check_episode(episode: events_pb2.EpisodeCompleted) -> None:
    """Reject what can never become training data (the consumer dead-letters it with this reason)."""
    if not episode.episode_id:
        raise InvalidInput("episode_id is empty (it is the replay's idempotency key)")
    if not episode.steps:
        raise InvalidInput(f"episode {episode.episode_id} has no steps")


class TrainingStopped(Exception):
    """A Train stopped before its last update because its caller went away; θ was put back."""


@dataclass(frozen=True)
class TrainResult:
    entry: PolicyEntry
    losses: dict[str, float]
    steps: int
    samples: int
    replay_size: int
    replay_episodes: int

    @classmethod
    def of(cls, entry: PolicyEntry) -> TrainResult:
        """The result as it was when `entry` was published (a repeated request is answered with it)."""
        m = entry.metrics
        return cls(entry, {k: v for k, v in m.items() if k not in BOOKKEEPING}, int(m.get("steps", 0)),
                   int(m.get("samples", 0)), int(m.get("replay_size", 0)), int(m.get("replay_episodes", 0)))


class PolicyTrainer:
    def __init__(self, settings: Settings) -> None:
        ls = settings.learner
        self.settings = settings  # recorded with each published version
        root = settings.state_dir / "learner"
        self.checkpoint = root / "checkpoint.pt"
        self.weights = root / "weights"
        self.kept_weights = ls.kept_weights
        self.registry = PolicyRegistry(root / "policies")
        featurizer: TextEncoder
        if ls.encoder == "reader":
            featurizer = TokenFeaturizer(ls.reader_tokens, goal_tokens=ls.reader_goal_tokens)
        else:
            spec = {"kind": "hash", "dim": ls.feature_dim} if ls.featurizer == "hash" else {"kind": "minilm"}
            featurizer = featurizer_from_spec(spec, cache_dir=feature_cache_dir(settings.state_dir))
        self.replay = MixedReplay(root / "replay.sqlite", capacity=ls.replay_capacity,
                                  offline_capacity=ls.library_capacity, online_fraction=ls.online_fraction,
                                  gamma=settings.search.gamma)
        self.replay.load()
        config = TrainConfig(gamma=settings.search.gamma, hidden=ls.hidden, width=ls.reader_width,
                             layers=ls.reader_layers)
        self.learner = Learner(featurizer, ls, config, self.replay)
        if self.checkpoint.exists():
            self.learner.load(self.checkpoint)
        latest = self.registry.latest()
        # The index outlives a lost checkpoint: a version number is never handed out twice.
        self.learner.version = max(self.learner.version, latest.number if latest else 0)
        self.weights_of = self.learner.version  # the published version θ's weights are now (0: none)
        self.max_policy_age = ls.max_policy_age
        self.train_folds = frozenset(ls.train_folds)
        self.skipped: OrderedDict[str, str] = OrderedDict()  # episode id -> fold, newest last
        self.skipped_total = 0

    def ingest(self, episode: events_pb2.EpisodeCompleted) -> Ingested:
        """Store a training-fold episode durably ("duplicate" if stored before: a redelivery or a replay)."""
        check_episode(episode)
        if episode.fold not in self.train_folds:
            if episode.episode_id not in self.skipped:
                self.skipped_total += 1
            self.skipped[episode.episode_id] = episode.fold
            while len(self.skipped) > SKIPPED_REMEMBERED:
                self.skipped.popitem(last=False)
            return "other_fold"
        # Demonstrations (the environment's gold path) anchor the offline library; the rest is online experience.
        return "stored" if self.replay.add(episode, offline=episode.agent == AgentKind.DEMO) else "duplicate"

    def import_episodes(self, episodes: list[events_pb2.EpisodeCompleted], first: int = 0) -> int:
        """Store episodes in the offline library, whatever their agent (a library import); returns how many were
        new. InvalidInput names the first one that cannot be training data (by its position from `first`),
        before anything of the batch is stored."""
        for i, episode in enumerate(episodes, first):
            try:
                check_episode(episode)
            except InvalidInput as exc:
                raise InvalidInput(f"episode {i}: {exc}") from None
            if episode.fold not in self.train_folds:
                folds = ", ".join(sorted(self.train_folds))
                raise InvalidInput(f"episode {i} ({episode.episode_id}) is from the {episode.fold or '(empty)'!r} "
                                   f"fold, not training data (learner.train_folds: {folds})")
        return self.replay.add_many(episodes, offline=True)

    def fold_problem(self, episode_id: str) -> str | None:
        """Why a skipped episode is not in replay; None for one that was not skipped (or long ago)."""
        fold = self.skipped.get(episode_id)
        if fold is None:
            return None
        return (f"episode {episode_id} is from the {fold or '(empty)'!r} fold, not training data "
                f"(learner.train_folds: {', '.join(sorted(self.train_folds))})")

    def has(self, episode_id: str) -> bool:
        return episode_id in self.replay.online or episode_id in self.replay.offline

    @property
    def replay_episodes(self) -> int:
        return len(self.replay.online.episode_ids) + len(self.replay.offline.episode_ids)

    def made_by(self, request_id: str) -> TrainResult | None:
        """What the Train request `request_id` published, if it did (read back from the registry index)."""
        entry = self.registry.made_by(request_id) if request_id else None
        return TrainResult.of(entry) if entry else None

    def start_from(self, version: str) -> None:
        """Put back θ (network, optimiser, skill vocabulary) as published under `version`; the version counter
        keeps counting up. FailedPrecondition when its weights are no longer kept, NotFound when it was never
        published."""
        number = parse_version(version)
        if number == self.weights_of:
            return
        self.registry.get(version)  # NotFound for a version never published
        path = self.weights / f"{version_name(number)}.pt"
        if not path.exists():
            raise FailedPrecondition(f"θ {version_name(number)}'s weights are no longer kept (the learner keeps the "
                                     f"last {self.kept_weights}, learner.kept_weights): train from a later version")
        counter = self.learner.version
        self.learner.load(path)
        self.learner.version, self.weights_of = counter, number

    def _keep_weights(self) -> None:
        """The checkpoint just written, kept as this version's weights; the oldest beyond the limit removed."""
        self.weights.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.checkpoint, self.weights / f"{version_name(self.learner.version)}.pt")
        self.weights_of = self.learner.version
        for old in sorted(self.weights.glob("v*.pt"))[:-self.kept_weights or None]:
            old.unlink(missing_ok=True)

    def train(self, steps: int, batch_size: int = 0, online_fraction: float | None = None,
              seed: int = 0, request_id: str = "", from_version: str = "",
              stop: threading.Event | None = None) -> TrainResult:
        """`steps` updates from replay, then export, checkpoint and publish the next version (recording
        `request_id` with it in the same index write, so a retry finds it however late it comes).

        θ is never poisoned: updates whose loss or gradient is not finite are refused one by one, and a θ that
        is not fit to serve afterwards (`export.unfit`) is never published: the last good θ is put back and
        FailedPrecondition says why. `from_version`: start from that published θ rather than θ as it is (a
        training run that kept an earlier version serving goes on from it). `stop` set meanwhile (the caller
        went away): θ is put back after the update in progress, nothing is published, and TrainingStopped."""
        if len(self.replay) == 0:
            raise FailedPrecondition("replay is empty: no episode (evoskill.episode.completed) has been "
                                     "ingested yet, nothing to train on")
        if from_version:
            self.start_from(from_version)
        base, base_fraction = self.learner.settings, self.replay.online_fraction
        if seed:
            self.learner.rng = np.random.default_rng(seed)
            self.replay.rng = np.random.default_rng(seed)
        self.learner.settings = base.model_copy(update={"batch_size": batch_size or base.batch_size})
        self.replay.online_fraction = base_fraction if online_fraction is None else online_fraction
        good = self.learner.snapshot()
        try:
            metrics = self.learner.train(steps, stop)
            used_batch = self.learner.settings.batch_size
        finally:
            self.learner.settings, self.replay.online_fraction = base, base_fraction
        if stop is not None and stop.is_set():
            self.learner.restore(good)
            raise TrainingStopped(f"stopped after {int(metrics.get('steps', 0))} of {steps} updates: nothing "
                                  f"published, θ stays as it was (version {self.learner.version})")
        done = int(metrics.pop("steps", 0))
        if not done:
            self.learner.restore(good)
            raise FailedPrecondition(f"every one of {steps} updates had a non-finite loss or gradient: nothing "
                                     f"published, θ stays as it was (version {self.learner.version})")
        path = self._export_fit(good)
        self.learner.save(self.checkpoint)  # before the index: a restart must not reuse the version
        self._keep_weights()
        size, episodes = len(self.replay), self.replay_episodes
        trained = {"steps": steps, "batch_size": used_batch, "seed": seed, "request_id": request_id,
                   "online_fraction": base_fraction if online_fraction is None else online_fraction,
                   "from_version": from_version, "environments": self.replay.environments()}
        entry = self.registry.add(self.learner.version, path, {
            **metrics, "steps": float(done), "samples": float(done * used_batch),
            "replay_size": float(size), "replay_episodes": float(episodes), "total_steps": float(self.learner.steps),
        }, request_id, {"train": trained, **run_record(self.settings)})
        if self.max_policy_age > 0:
            self.replay.evict_stale(self.learner.version, self.max_policy_age)
        losses = {k: v for k, v in metrics.items() if k not in BOOKKEEPING}
        return TrainResult(entry, losses, done, done * used_batch, size, episodes)

    def _export_fit(self, good: dict[str, Any]) -> Path:
        """Export the next version if θ is fit to serve; else put `good` back and refuse."""
        bad = self.learner.nonfinite()
        problem = f"parameters {', '.join(bad[:3])} are not finite" if bad else None
        if problem is None:
            latest = self.registry.latest()  # a version number is never handed out twice, whoever wrote the index
            self.learner.version = max(self.learner.version, latest.number if latest else 0)
            path = self.learner.export(self.registry.directory)
            problem = unfit(OnnxPolicy(path, self.learner.featurizer))
            if problem is None:
                return path
            path.unlink(missing_ok=True)
            self.learner.version -= 1  # nothing was published under it
        self.learner.restore(good)
        raise FailedPrecondition(f"the update left θ unfit to publish ({problem}): nothing published, the last "
                                 f"good θ is kept (version {self.learner.version})")

    def close(self) -> None:
        self.replay.close()
