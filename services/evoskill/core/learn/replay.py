"""Experience replay: prioritised buffers of steps, an offline library and an online buffer mixed by
`online_fraction` (seed 004 §3), durable in one sqlite file.

- `PrioritizedReplay`: steps of whole episodes. Sampling probability ∝ priority^α, with importance
  weights (N·P)^-β normalised by the largest in the buffer (Schaul et al. 2016). A new step's
  priority is its value surprise |return - V_search(s)| (the largest seen so far where the search
  gave no V); the learner replaces it with |return - V_θ(s)| after each update (seed 000 §5.2).
  Over capacity (counted in steps), the oldest episodes go first.
- `MixedReplay`: the offline library (demonstrations, gold paths, archived successes) anchors what
  is known to work; the online buffer holds fresh experience of recent policy versions. Each batch
  takes round(n · online_fraction) steps from the online buffer and the rest from the library (all
  from one if the other is empty). Online episodes older than a policy-version age are stale: the
  successful ones move to the library, the others are dropped.
- Durability: every added episode is committed to sqlite (the serialised proto, its buffer and
  policy version) before `add` returns, so an event can be acked right after; `load()` rebuilds
  both buffers after a restart. An evicted episode keeps its row without payload, so adding the
  same episode id again (a redelivery) is a no-op forever. Priorities are learning state, not data:
  they are recomputed on load.
- Only episodes within the schema of limits (`core.limits`: finite rewards and statistics aligned with the
  actions) are stored, whoever calls; one stored before that check existed is left out on load.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import sqlite3
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from evoskill.core.errors import InvalidInput
from evoskill.core.learn.data import Example, TemplateFn, episode_examples
from evoskill.core.limits import check_message
from evoskill.envs.base import heuristic_template
from evoskill.events.v1.events_pb2 import EpisodeCompleted

log = logging.getLogger(__name__)
StepKey = tuple[str, int]  # (episode id, position of the step among the episode's examples)
ONLINE, OFFLINE, EVICTED = "online", "offline", "evicted"


@dataclass
class _Entry:
    examples: list[Example]
    priorities: np.ndarray
    version: int
    won: bool


class PrioritizedReplay:
    """A capacity-bounded, prioritised buffer of episode steps, oldest episodes evicted first."""

    def __init__(self, capacity: int, *, alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-3) -> None:
        self.capacity = capacity
        self.alpha = alpha
        self.beta = beta
        self.eps = eps
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._steps = 0
        self._max_priority = 1.0
        self._flat: list[StepKey] | None = None  # flattened view for sampling, rebuilt after add/evict
        self._flat_p: np.ndarray = np.zeros(0)

    def __len__(self) -> int:
        return self._steps

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._entries

    @property
    def episode_ids(self) -> list[str]:
        return list(self._entries)

    def examples(self, episode_id: str) -> list[Example]:
        return list(self._entries[episode_id].examples)

    def version_of(self, episode_id: str) -> int:
        return self._entries[episode_id].version

    def add(self, episode_id: str, examples: list[Example], version: int, won: bool = False) -> list[str]:
        """Add an episode's steps (ignored if present); returns the ids evicted to make room."""
        if episode_id in self._entries:
            return []
        surprise = [abs(e.ret - e.root_value) + self.eps if math.isfinite(e.root_value) else math.nan for e in examples]
        priorities = np.array([self._max_priority if math.isnan(s) else s for s in surprise], dtype=np.float64)
        if priorities.size:
            self._max_priority = max(self._max_priority, float(priorities.max()))
        self._entries[episode_id] = _Entry(examples, priorities, version, won)
        self._steps += len(examples)
        self._flat = None
        evicted: list[str] = []
        while self._steps > self.capacity and len(self._entries) > 1:
            oldest = next(iter(self._entries))
            self.remove(oldest)
            evicted.append(oldest)
        return evicted

    def remove(self, episode_id: str) -> _Entry | None:
        entry = self._entries.pop(episode_id, None)
        if entry is not None:
            self._steps -= len(entry.examples)
            self._flat = None
        return entry

    def older_than(self, min_version: int) -> list[str]:
        return [eid for eid, e in self._entries.items() if e.version < min_version]

    def _view(self) -> tuple[list[StepKey], np.ndarray]:
        if self._flat is None:
            self._flat = [(eid, i) for eid, e in self._entries.items() for i in range(len(e.examples))]
            parts = [e.priorities for e in self._entries.values()]
            self._flat_p = np.concatenate(parts) if parts else np.zeros(0)
        return self._flat, self._flat_p

    def sample(self, n: int, rng: np.random.Generator) -> tuple[list[Example], list[StepKey], np.ndarray]:
        """n steps drawn with replacement ∝ priority^α, with their normalised importance weights."""
        keys, priorities = self._view()
        if n <= 0 or not keys:
            return [], [], np.zeros(0, np.float32)
        scaled = priorities**self.alpha
        probs = scaled / scaled.sum()
        idx = rng.choice(len(keys), size=n, p=probs)
        # Normalised by the largest weight in the buffer, that of the least likely step that can be drawn.
        p_min = probs[probs > 0].min()
        weights = (len(keys) * probs[idx]) ** -self.beta / (len(keys) * p_min) ** -self.beta
        chosen = [keys[i] for i in idx]
        return [self._entries[eid].examples[i] for eid, i in chosen], chosen, weights.astype(np.float32)

    def update_priorities(self, keys: Sequence[StepKey], priorities: Iterable[float]) -> None:
        """New priorities for sampled steps (those evicted since are skipped)."""
        for (eid, i), p in zip(keys, priorities, strict=True):
            entry = self._entries.get(eid)
            if entry is None:
                continue
            entry.priorities[i] = float(p) + self.eps
            self._max_priority = max(self._max_priority, entry.priorities[i])
        self._flat = None


class ReplaySample(NamedTuple):
    examples: list[Example]
    keys: list[StepKey]
    weights: np.ndarray  # importance weights [n], each buffer normalised to max 1
    online: int  # how many of the examples (the first ones) came from the online buffer


_SCHEMA = """
CREATE TABLE IF NOT EXISTS episodes (
    episode_id TEXT PRIMARY KEY,
    buffer TEXT NOT NULL,        -- online | offline | evicted
    version INTEGER NOT NULL,    -- policy version that produced the episode
    payload BLOB                 -- serialised EpisodeCompleted; NULL once evicted (the id stays)
)
"""


def policy_version_number(version: str) -> int:
    """The integer in a policy version string ("v000012" -> 12; none -> 0)."""
    m = re.search(r"(\d+)\D*$", version)
    return int(m.group(1)) if m else 0


def _within_limits(episode: EpisodeCompleted) -> bool:
    try:
        check_message(episode)
    except InvalidInput as exc:
        log.warning("replay: episode %s: %s", episode.episode_id[:64], exc)
        return False
    return True


class MixedReplay:
    """Offline library + online buffer, sampled by `online_fraction`, persisted to `path` (sqlite)."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        capacity: int = 10_000,
        offline_capacity: int | None = None,
        online_fraction: float = 0.5,
        gamma: float = 0.97,
        alpha: float = 0.6,
        beta: float = 0.4,
        template_of: TemplateFn = heuristic_template,
        seed: int = 0,
    ) -> None:
        self.online = PrioritizedReplay(capacity, alpha=alpha, beta=beta)
        self.offline = PrioritizedReplay(offline_capacity or capacity, alpha=alpha, beta=beta)
        self.online_fraction = online_fraction
        self.gamma = gamma
        # Action strings repeat across steps and episodes; the template of each is worked out once.
        self.template_of: TemplateFn = functools.lru_cache(maxsize=1 << 16)(template_of)
        self.rng = np.random.default_rng(seed)
        self._lock = threading.RLock()  # events arrive on the service loop while training runs in a thread
        self._db: sqlite3.Connection | None = None
        self._seen: set[str] = set()  # without a file: the ids ever added, for idempotency
        self._env_of: dict[str, str] = {}  # env spec of each episode in a buffer: what θ is trained on
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(_SCHEMA)

    def __len__(self) -> int:
        return len(self.online) + len(self.offline)

    def _buffer(self, name: str) -> PrioritizedReplay:
        return self.offline if name == OFFLINE else self.online

    def _insert(self, episode: EpisodeCompleted, buffer: str, version: int) -> bool:
        """Record the episode durably; False if its id was ever seen before."""
        if self._db is None:
            fresh = episode.episode_id not in self._seen
            self._seen.add(episode.episode_id)
            return fresh
        cur = self._db.execute(
            "INSERT OR IGNORE INTO episodes (episode_id, buffer, version, payload) VALUES (?, ?, ?, ?)",
            (episode.episode_id, buffer, version, episode.SerializeToString()),
        )
        return cur.rowcount == 1

    def _mark(self, episode_ids: Iterable[str], buffer: str) -> None:
        ids = [(i,) for i in episode_ids]
        if buffer == EVICTED:
            for (i,) in ids:
                self._env_of.pop(i, None)
        if self._db is None:
            return
        if buffer == EVICTED:
            self._db.executemany("UPDATE episodes SET buffer = 'evicted', payload = NULL WHERE episode_id = ?", ids)
        else:
            self._db.executemany("UPDATE episodes SET buffer = ? WHERE episode_id = ?", [(buffer, i) for (i,) in ids])

    def _place(self, episode: EpisodeCompleted, buffer: str, version: int) -> None:
        examples = episode_examples(episode, self.gamma, self.template_of)
        self._env_of[episode.episode_id] = episode.env_spec
        evicted = self._buffer(buffer).add(episode.episode_id, examples, version, episode.won)
        self._mark(evicted, EVICTED)

    def add(self, episode: EpisodeCompleted, *, offline: bool = False, version: int | None = None) -> bool:
        """Store an episode (durably, before returning). False if this episode id was seen before."""
        return self.add_many([episode], offline=offline, version=version) == 1

    def add_many(self, episodes: Sequence[EpisodeCompleted], *, offline: bool = False,
                 version: int | None = None) -> int:
        """Store episodes in one transaction (one disk sync for all: a library import brings thousands), durably
        before returning; returns how many were new (the others' ids were seen before)."""
        for episode in episodes:
            if not episode.episode_id:
                raise InvalidInput("an episode needs an episode_id (it is the idempotency key)")
            check_message(episode)
        buffer = OFFLINE if offline else ONLINE
        versions = [policy_version_number(e.policy_version) if version is None else version for e in episodes]
        with self._lock:
            if self._db is not None:
                self._db.execute("BEGIN")
            try:
                fresh = [(e, v) for e, v in zip(episodes, versions, strict=True) if self._insert(e, buffer, v)]
            except BaseException:
                if self._db is not None:
                    self._db.execute("ROLLBACK")
                raise
            if self._db is not None:
                self._db.execute("COMMIT")
            for episode, v in fresh:
                self._place(episode, buffer, v)
            return len(fresh)

    def stored(self, buffers: Sequence[str] = (OFFLINE,), chunk: int = 256) -> Iterator[EpisodeCompleted]:
        """The episodes of `buffers` as stored on disk, oldest first (read in chunks, so adds may go on)."""
        if self._db is None:
            return
        marks = ",".join("?" * len(buffers))
        last = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT rowid, payload FROM episodes WHERE buffer IN ({marks}) AND payload IS NOT NULL "
                    "AND rowid > ? ORDER BY rowid LIMIT ?", (*buffers, last, chunk)).fetchall()
            if not rows:
                return
            for rowid, payload in rows:
                last = rowid
                yield EpisodeCompleted.FromString(payload)

    def load(self) -> int:
        """Rebuild both buffers from disk (after a restart); returns the number of episodes restored."""
        if self._db is None:
            return 0
        with self._lock:
            rows = self._db.execute(
                "SELECT buffer, version, payload FROM episodes WHERE payload IS NOT NULL ORDER BY rowid"
            ).fetchall()
            older = unfit = 0
            for buffer, version, payload in rows:
                episode = EpisodeCompleted.FromString(payload)
                if not any(step.action.text for step in episode.steps):
                    older += 1  # stored before steps were published once (EpisodeStep.transition): unreadable
                elif not _within_limits(episode):
                    unfit += 1  # stored before the limits were checked: a NaN here would reach θ
                elif episode.episode_id not in self._buffer(buffer):
                    self._place(episode, buffer, int(version))
            if older:
                log.warning("replay: %d stored episodes are in the format before EpisodeStep lost its transition "
                            "and are left out", older)
            if unfit:
                log.warning("replay: %d stored episodes break the limits of core.limits and are left out", unfit)
            return len(rows) - older - unfit

    def environments(self) -> dict[str, int]:
        """Episodes in replay (both buffers) per environment spec, most first."""
        with self._lock:
            return dict(Counter(self._env_of.values()).most_common())

    def sample(self, n: int) -> ReplaySample:
        with self._lock:
            if len(self.online) and len(self.offline):
                n_online = round(n * self.online_fraction)
            else:
                n_online = n if len(self.online) else 0
            ex_on, keys_on, w_on = self.online.sample(n_online, self.rng)
            ex_off, keys_off, w_off = self.offline.sample(n - n_online, self.rng)
            return ReplaySample(ex_on + ex_off, keys_on + keys_off, np.concatenate([w_on, w_off]), len(ex_on))

    def update_priorities(self, keys: Sequence[StepKey], priorities: Sequence[float]) -> None:
        with self._lock:
            for buffer in (self.online, self.offline):
                picked = [(k, p) for k, p in zip(keys, priorities, strict=True) if k[0] in buffer]
                if picked:
                    buffer.update_priorities([k for k, _ in picked], [p for _, p in picked])

    def evict_stale(self, current_version: int, max_age: int) -> int:
        """Drop online episodes more than `max_age` policy versions old; successful ones move to the
        offline library instead. Returns how many left the online buffer."""
        with self._lock:
            stale = self.online.older_than(current_version - max_age)
            for eid in stale:
                entry = self.online.remove(eid)
                if entry is None:
                    continue
                if entry.won:
                    self._mark([eid], OFFLINE)
                    crowded_out = self.offline.add(eid, entry.examples, entry.version, won=True)
                    self._mark(crowded_out, EVICTED)
                else:
                    self._mark([eid], EVICTED)
            return len(stale)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
