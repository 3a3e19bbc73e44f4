"""Memory tiers (seed 004 §5.1): which hot experiences go cold, and how they are summarised; no network.

Hot is the experience collection (one point per step). Old or low-value experiences move, whole episodes at
a time, into the cold collection as **summaries**, one per (environment family, skill template, action,
outcome): counts, mean/min/max reward, mean outcome value, first and last time, the episodes' count, the
environment specs seen, and one representative member (goal, state, feedback, spec and its vector: the
member with the highest reward, ties to the latest, then the smallest id). Summaries merge exactly (sums,
minima, maxima, the representative a maximum), so summarising in several runs gives what one run gives.

Whole episodes: an episode's steps go cold together, so a summary's episode count is exact (an episode is
never split across runs) and a redelivered event of a step gone cold is recognised by its episode alone.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evoskill.core.memory.experience import POINT_NAMESPACE
from evoskill.memory.v1 import memory_pb2

KNOWN = ("won", "lost")
MAX_SPECS = 32  # environment specs a summary names (a family has few)

GroupKey = tuple[str, str, str, str]  # (env_family, template, action, outcome)


def episode_key(payload: Mapping[str, Any]) -> str:
    """What goes cold together: the episode, or the unit alone when it has none (a Store, an import)."""
    return str(payload.get("episode_id") or "") or f"unit:{payload.get('id', '')}"


def ledger_id(key: str) -> str:
    """The cold collection's point recording that episode `key` went cold (a payload-only point)."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"cold-episode:{key}"))


def experience_value(payload: Mapping[str, Any]) -> float:
    """How much an experience is worth keeping hot, in [-1, 1] (as fusion values a memory): won 1; lost the
    mean of tanh(step reward) and the outcome's value; pending tanh(step reward)."""
    step = float(payload.get("reward_unit", 0.0))
    outcome = payload.get("outcome", "pending")
    if outcome == "won":
        return 1.0
    if outcome == "lost":
        return (step + float(payload.get("outcome_value", 0.0))) / 2
    return step


@dataclass(frozen=True)
class EpisodeDigest:
    """What the choice of cold episodes needs of one episode in hot."""

    key: str
    size: int  # its hot experiences
    newest_ms: int  # its latest write
    value: float  # its best experience's value


def digest_episodes(payloads: Iterable[Mapping[str, Any]]) -> list[EpisodeDigest]:
    """One digest per episode of the hot payloads (`time_unix_ms`, `reward_unit`, `outcome`, ...)."""
    sizes: dict[str, int] = {}
    newest: dict[str, int] = {}
    best: dict[str, float] = {}
    for payload in payloads:
        key = episode_key(payload)
        sizes[key] = sizes.get(key, 0) + 1
        newest[key] = max(newest.get(key, 0), int(payload.get("time_unix_ms", 0)))
        best[key] = max(best.get(key, -math.inf), experience_value(payload))
    return [EpisodeDigest(key, sizes[key], newest[key], best[key]) for key in sizes]


@dataclass(frozen=True)
class Limits:
    """Retention limits (memory.tiers): 0 = no such limit; low_value_below -1 = none (values are >= -1)."""

    hot_max: int = 0
    max_age_ms: int = 0
    low_value_below: float = -1.0
    min_age_ms: int = 0  # nothing younger goes cold, whatever the other limits say


def select_cold(episodes: Sequence[EpisodeDigest], now_ms: int, limits: Limits) -> list[tuple[str, str]]:
    """The episodes to move cold, with why ("age", "low_value", "count"): every episode older than max_age,
    every one whose best value is below low_value_below, then the oldest others until hot holds at most
    hot_max. None younger than min_age. Deterministic: oldest first, ties by key."""
    settled = sorted((e for e in episodes if now_ms - e.newest_ms >= limits.min_age_ms),
                     key=lambda e: (e.newest_ms, e.key))
    chosen: list[tuple[str, str]] = []
    left = sum(e.size for e in episodes)
    for episode in settled:
        if limits.max_age_ms and now_ms - episode.newest_ms > limits.max_age_ms:
            reason = "age"
        elif episode.value < limits.low_value_below:
            reason = "low_value"
        elif limits.hot_max and left > limits.hot_max:
            reason = "count"
        else:
            continue
        chosen.append((episode.key, reason))
        left -= episode.size
    return chosen


def batches(chosen: Sequence[tuple[str, str]], sizes: Mapping[str, int], batch: int) -> list[list[str]]:
    """The chosen episodes in order, cut into batches of about `batch` experiences (an episode is never split;
    one larger than `batch` is a batch of its own)."""
    out: list[list[str]] = []
    current: list[str] = []
    held = 0
    for key, _ in chosen:
        if current and held + sizes[key] > batch:
            out.append(current)
            current, held = [], 0
        current.append(key)
        held += sizes[key]
    if current:
        out.append(current)
    return out


def batch_id(keys: Iterable[str]) -> str:
    """A batch's identity, the same however often it is retried: derived from its episodes."""
    return str(uuid.uuid5(POINT_NAMESPACE, "cold-batch:" + "\x1f".join(sorted(keys))))


def group_key(payload: Mapping[str, Any]) -> GroupKey:
    family = str(payload.get("env_family") or str(payload.get("env_spec", "")).split("?", 1)[0])
    return (family, str(payload.get("template", "")), str(payload.get("action", "")),
            str(payload.get("outcome", "pending")))


def summary_id(key: GroupKey) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, "cold-summary:" + "\x1f".join(key)))


@dataclass(frozen=True)
class Representative:
    """The member a summary shows and is found by: ordered by (reward, time, -id)."""

    reward: float
    time_ms: int
    id: str
    goal: str = ""
    state: str = ""
    feedback: str = ""
    env_spec: str = ""
    vector: tuple[float, ...] = ()

    def rank(self) -> tuple[float, int, tuple[int, ...]]:
        return (self.reward, self.time_ms, tuple(-ord(c) for c in self.id))


@dataclass(frozen=True)
class Summary:
    """Experiences of one group gone cold, as one point (see the module docstring)."""

    key: GroupKey
    count: int
    episodes: int
    reward_sum: float
    reward_min: float
    reward_max: float
    outcome_value_sum: float
    first_ms: int
    last_ms: int
    env_specs: tuple[str, ...]
    representative: Representative
    batches: tuple[str, ...] = field(default=())  # the last compaction batches merged in (retries skip them)

    @property
    def reward_mean(self) -> float:
        return self.reward_sum / self.count

    @property
    def outcome_value_mean(self) -> float:
        return self.outcome_value_sum / self.count


MAX_BATCHES = 16  # batch ids a summary remembers: a batch is finished right after it is merged


def summarise(members: Sequence[tuple[Mapping[str, Any], Sequence[float]]], batch: str = "") -> dict[GroupKey, Summary]:
    """Summaries of (payload, vector) members, by group; `batch` recorded in each."""
    groups: dict[GroupKey, list[tuple[Mapping[str, Any], Sequence[float]]]] = {}
    for payload, vector in members:
        groups.setdefault(group_key(payload), []).append((payload, vector))
    out = {}
    for key, group in groups.items():
        rewards = [float(p.get("reward", 0.0)) for p, _ in group]
        times = [int(p.get("time_unix_ms", 0)) for p, _ in group]
        reps = [Representative(float(p.get("reward", 0.0)), int(p.get("time_unix_ms", 0)), str(p.get("id", "")),
                               str(p.get("goal", "")), str(p.get("state", "")), str(p.get("feedback", "")),
                               str(p.get("env_spec", "")), tuple(float(x) for x in v)) for p, v in group]
        out[key] = Summary(
            key=key, count=len(group), episodes=len({episode_key(p) for p, _ in group}),
            reward_sum=sum(rewards), reward_min=min(rewards), reward_max=max(rewards),
            outcome_value_sum=sum(float(p.get("outcome_value", 0.0)) for p, _ in group),
            first_ms=min(times), last_ms=max(times),
            env_specs=tuple(sorted({str(p.get("env_spec", "")) for p, _ in group if p.get("env_spec")}))[:MAX_SPECS],
            representative=max(reps, key=Representative.rank), batches=(batch,) if batch else (),
        )
    return out


def merge(a: Summary, b: Summary) -> Summary:
    """One summary of both (same group): exact for counts, sums, extremes and the representative."""
    if a.key != b.key:
        raise ValueError(f"cannot merge summaries of {a.key} and {b.key}")
    return replace(
        a, count=a.count + b.count, episodes=a.episodes + b.episodes, reward_sum=a.reward_sum + b.reward_sum,
        reward_min=min(a.reward_min, b.reward_min), reward_max=max(a.reward_max, b.reward_max),
        outcome_value_sum=a.outcome_value_sum + b.outcome_value_sum, first_ms=min(a.first_ms, b.first_ms),
        last_ms=max(a.last_ms, b.last_ms), env_specs=tuple(sorted(set(a.env_specs) | set(b.env_specs)))[:MAX_SPECS],
        representative=max(a.representative, b.representative, key=Representative.rank),
        batches=tuple(dict.fromkeys(a.batches + b.batches))[-MAX_BATCHES:],
    )


def to_cold_payload(summary: Summary) -> dict[str, Any]:
    """The summary's point payload. Retrieval's filters and formula read the same keys as on a hot point
    (`env_family`, `env_spec`: every spec seen, `template`, `action`, `outcome`, `reward_unit`: tanh of the
    mean reward, `outcome_value`: the mean), so one query shape serves both tiers."""
    family, template, action, outcome = summary.key
    rep = summary.representative
    return {
        "kind": "summary", "env_family": family, "template": template, "action": action, "outcome": outcome,
        "env_spec": list(summary.env_specs), "count": summary.count, "episodes": summary.episodes,
        "reward_sum": summary.reward_sum, "reward_min": summary.reward_min, "reward_max": summary.reward_max,
        "reward_unit": math.tanh(summary.reward_mean), "outcome_value_sum": summary.outcome_value_sum,
        "outcome_value": summary.outcome_value_mean, "first_unix_ms": summary.first_ms,
        "time_unix_ms": summary.last_ms, "batches": list(summary.batches),
        "rep": {"reward": rep.reward, "time_unix_ms": rep.time_ms, "id": rep.id, "goal": rep.goal,
                "state": rep.state, "feedback": rep.feedback, "env_spec": rep.env_spec},
    }


def from_cold_payload(payload: Mapping[str, Any], vector: Sequence[float] = ()) -> Summary:
    rep = payload.get("rep") or {}
    return Summary(
        key=(str(payload["env_family"]), str(payload["template"]), str(payload["action"]), str(payload["outcome"])),
        count=int(payload["count"]), episodes=int(payload["episodes"]), reward_sum=float(payload["reward_sum"]),
        reward_min=float(payload["reward_min"]), reward_max=float(payload["reward_max"]),
        outcome_value_sum=float(payload["outcome_value_sum"]), first_ms=int(payload["first_unix_ms"]),
        last_ms=int(payload["time_unix_ms"]), env_specs=tuple(payload.get("env_spec") or ()),
        representative=Representative(float(rep.get("reward", 0.0)), int(rep.get("time_unix_ms", 0)),
                                      str(rep.get("id", "")), str(rep.get("goal", "")), str(rep.get("state", "")),
                                      str(rep.get("feedback", "")), str(rep.get("env_spec", "")),
                                      tuple(float(x) for x in vector)),
        batches=tuple(payload.get("batches") or ()),
    )


_OUTCOMES = {"pending": memory_pb2.OUTCOME_PENDING, "won": memory_pb2.OUTCOME_WON, "lost": memory_pb2.OUTCOME_LOST}


def summary_experience(summary: Summary) -> memory_pb2.Experience:
    """A summary as an experience unit, so that fusion weighs it as it weighs a hot one: the representative's
    texts, the group's action and outcome, the mean reward, an episode score giving the mean outcome value;
    metadata `tier=cold` and the summary's figures."""
    family, template, action, outcome = summary.key
    rep = summary.representative
    return memory_pb2.Experience(
        id=f"cold:{summary_id(summary.key)}", goal=rep.goal, state=rep.state, action=action, template=template,
        feedback=rep.feedback, reward=summary.reward_mean, success=outcome == "won", env_spec=rep.env_spec,
        env_family=family, outcome=_OUTCOMES.get(outcome, memory_pb2.OUTCOME_PENDING),
        episode_score=summary.outcome_value_mean + 1.0 if outcome == "lost" else 0.0,
        time_unix_ms=summary.last_ms,
        metadata={"tier": "cold", "count": str(summary.count), "episodes": str(summary.episodes),
                  "reward_min": f"{summary.reward_min:.6g}", "reward_max": f"{summary.reward_max:.6g}",
                  "first_unix_ms": str(summary.first_ms), "representative": rep.id},
    )
