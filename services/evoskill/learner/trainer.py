"""θ with its replay, checkpoint and registry under `<state_dir>/learner/`: the learner's blocking half.

    replay.sqlite     every ingested episode (MixedReplay: durable, idempotent by episode id)
    checkpoint.pt     network, optimiser, skill vocabulary, step and version counters
    policies/         policy-v000001.onnx, ... and index.json (see `registry`)

A restart rebuilds replay from sqlite and continues from the checkpoint, and version numbers keep
increasing past whatever the registry lists. Every method blocks: the service calls them in threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evoskill.core.learn import Learner, MixedReplay, TrainConfig, featurizer_from_spec
from evoskill.events.v1 import events_pb2
from evoskill.learner.registry import PolicyEntry, PolicyRegistry, feature_cache_dir
from evoskill.platform.config import Settings
from evoskill.platform.rpc import FailedPreconditionError


def check_episode(episode: events_pb2.EpisodeCompleted) -> None:
    """Reject what can never become training data (the consumer dead-letters it with this reason)."""
    if not episode.episode_id:
        raise ValueError("episode_id is empty (it is the replay's idempotency key)")
    if not episode.steps:
        raise ValueError(f"episode {episode.episode_id} has no steps")


@dataclass(frozen=True)
class TrainResult:
    entry: PolicyEntry
    path: Path
    losses: dict[str, float]
    steps: int
    samples: int
    replay_size: int
    replay_episodes: int


class PolicyTrainer:
    def __init__(self, settings: Settings) -> None:
        ls = settings.learner
        root = settings.state_dir / "learner"
        self.checkpoint = root / "checkpoint.pt"
        self.registry = PolicyRegistry(root / "policies")
        spec = {"kind": "hash", "dim": ls.feature_dim} if ls.featurizer == "hash" else {"kind": "minilm"}
        featurizer = featurizer_from_spec(spec, cache_dir=feature_cache_dir(settings.state_dir))
        self.replay = MixedReplay(root / "replay.sqlite", capacity=ls.replay_capacity,
                                  online_fraction=ls.online_fraction, gamma=settings.search.gamma)
        self.replay.load()
        self.learner = Learner(featurizer, ls, TrainConfig(gamma=settings.search.gamma, hidden=ls.hidden),
                               self.replay)
        if self.checkpoint.exists():
            self.learner.load(self.checkpoint)
        latest = self.registry.latest()
        # The index outlives a lost checkpoint: a version number is never handed out twice.
        self.learner.version = max(self.learner.version, latest.number if latest else 0)
        self.max_policy_age = ls.max_policy_age

    def ingest(self, episode: events_pb2.EpisodeCompleted) -> bool:
        """Store the episode durably; False if it was stored before (a redelivery or a replay)."""
        check_episode(episode)
        return self.replay.add(episode)

    def has(self, episode_id: str) -> bool:
        return episode_id in self.replay.online or episode_id in self.replay.offline

    @property
    def replay_episodes(self) -> int:
        return len(self.replay.online.episode_ids) + len(self.replay.offline.episode_ids)

    def train(self, steps: int, batch_size: int = 0, online_fraction: float | None = None,
              seed: int = 0) -> TrainResult:
        """`steps` updates from replay, then export, checkpoint and publish the next version."""
        if len(self.replay) == 0:
            raise FailedPreconditionError("replay is empty: no episode (evoskill.episode.completed) has been "
                                          "ingested yet, nothing to train on")
        base, base_fraction = self.learner.settings, self.replay.online_fraction
        if seed:
            self.learner.rng = np.random.default_rng(seed)
            self.replay.rng = np.random.default_rng(seed)
        self.learner.settings = base.model_copy(update={"batch_size": batch_size or base.batch_size})
        self.replay.online_fraction = base_fraction if online_fraction is None else online_fraction
        try:
            metrics = self.learner.train(steps)
            used_batch = self.learner.settings.batch_size
        finally:
            self.learner.settings, self.replay.online_fraction = base, base_fraction
        done = int(metrics.pop("steps", 0))
        path = self.learner.export(self.registry.directory)
        self.learner.save(self.checkpoint)  # before the index: a restart must not reuse the version
        size, episodes = len(self.replay), self.replay_episodes
        entry = self.registry.add(self.learner.version, path, {
            **metrics, "steps": float(done), "samples": float(done * used_batch),
            "replay_size": float(size), "replay_episodes": float(episodes), "total_steps": float(self.learner.steps),
        })
        if self.max_policy_age > 0:
            self.replay.evict_stale(self.learner.version, self.max_policy_age)
        return TrainResult(entry, path, metrics, done, done * used_batch, size, episodes)

    def close(self) -> None:
        self.replay.close()
