"""The tiers' pure logic (core/memory/tiers.py), no Qdrant: which episodes go cold and why, batches, the
summaries (counts, rewards, times, the representative) and their exact merge."""

from __future__ import annotations

import math
from typing import Any

import pytest

from evoskill.core.memory import to_payload
from evoskill.core.memory.tiers import (
    EpisodeDigest,
    Limits,
    batch_id,
    batches,
    digest_episodes,
    episode_key,
    experience_value,
    from_cold_payload,
    merge,
    select_cold,
    summarise,
    summary_experience,
    to_cold_payload,
)
from evoskill.memory.v1 import memory_pb2

WON, LOST, PENDING = memory_pb2.OUTCOME_WON, memory_pb2.OUTCOME_LOST, memory_pb2.OUTCOME_PENDING
DAY = 86_400_000
NOW = 100 * DAY


def payload(episode: str, step: int, action: str = "move east", t: int = NOW, **fields: Any) -> dict[str, Any]:
    unit = memory_pb2.Experience(**{"goal": "find the coin", "state": f"room {step}", "action": action,
                                    "episode_id": episode, "step_index": step, "env_spec": "twx:coin?n=5",
                                    "template": "move X", "time_unix_ms": t, **fields})
    return to_payload(unit)


def digest(key: str, newest_ms: int, size: int = 1, value: float = 0.0) -> EpisodeDigest:
    return EpisodeDigest(key, size, newest_ms, value)


def test_an_experience_is_worth_what_fusion_makes_of_it() -> None:
    assert experience_value(payload("a", 0, outcome=WON, reward=-3.0)) == 1.0
    assert experience_value(payload("a", 0, reward=2.0)) == pytest.approx(math.tanh(2.0))
    # Lost with nothing scored and a negative step: below -0.5, the default threshold.
    assert experience_value(payload("a", 0, outcome=LOST, reward=-1.0)) == pytest.approx((math.tanh(-1) - 1) / 2)
    assert experience_value(payload("a", 0, outcome=LOST, reward=0.0, episode_score=0.8)) == pytest.approx(-0.1)


def test_digests_are_per_episode_and_a_unit_without_one_is_its_own() -> None:
    payloads = [payload("a", 0, t=5, reward=-1.0), payload("a", 1, t=9, reward=1.0), payload("", 0, id="x", t=3)]
    assert episode_key(payloads[2]) == "unit:x"
    by_key = {d.key: d for d in digest_episodes(payloads)}
    assert by_key["a"] == EpisodeDigest("a", 2, 9, pytest.approx(math.tanh(1.0)))  # type: ignore[arg-type]
    assert by_key["unit:x"].size == 1 and by_key["unit:x"].newest_ms == 3


def test_old_low_value_and_overflowing_episodes_go_cold_the_oldest_first_none_too_young() -> None:
    episodes = [digest("old", NOW - 40 * DAY, size=3, value=1.0), digest("bad", NOW - 2 * DAY, value=-0.9),
                digest("b", NOW - 3 * DAY, size=2, value=0.5), digest("c", NOW - 2 * DAY, size=2, value=0.5),
                digest("fresh", NOW - 1000, size=5, value=-1.0)]
    limits = Limits(hot_max=7, max_age_ms=30 * DAY, low_value_below=-0.5, min_age_ms=3_600_000)
    # 13 hot: old (age) and bad (low value) leave 9; b (oldest left) brings it to 7; fresh is too young.
    assert select_cold(episodes, NOW, limits) == [("old", "age"), ("b", "count"), ("bad", "low_value")]
    assert select_cold(episodes, NOW, Limits()) == []  # no limits: nothing moves
    assert select_cold(episodes, NOW, Limits(hot_max=1)) == [
        ("old", "count"), ("b", "count"), ("bad", "count"), ("c", "count"), ("fresh", "count")]
    assert select_cold(episodes, NOW, Limits(hot_max=1, min_age_ms=DAY + 1)) == [
        ("old", "count"), ("b", "count"), ("bad", "count"), ("c", "count")]


def test_batches_keep_episodes_whole_and_their_ids_are_stable() -> None:
    chosen = [("a", "age"), ("b", "age"), ("c", "count"), ("d", "count")]
    sizes = {"a": 2, "b": 5, "c": 1, "d": 1}
    assert batches(chosen, sizes, 3) == [["a"], ["b"], ["c", "d"]]
    assert batches(chosen, sizes, 100) == [["a", "b", "c", "d"]]
    assert batch_id(["a", "b"]) == batch_id(["b", "a"]) != batch_id(["a"])


def members(*payloads: dict[str, Any]) -> list[tuple[dict[str, Any], list[float]]]:
    return [(p, [float(i), 1.0]) for i, p in enumerate(payloads)]


def test_a_summary_keeps_counts_rewards_times_episodes_and_a_representative() -> None:
    group = members(payload("a", 0, t=10, reward=1.0, outcome=WON), payload("a", 3, t=20, reward=3.0, outcome=WON),
                    payload("b", 1, t=5, reward=3.0, outcome=WON, env_spec="twx:coin"),
                    payload("b", 2, action="take coin", t=7, reward=9.0, outcome=WON))
    summaries = summarise(group, "batch-1")
    assert set(summaries) == {("twx:coin", "move X", "move east", "won"), ("twx:coin", "move X", "take coin", "won")}
    east = summaries[("twx:coin", "move X", "move east", "won")]
    assert (east.count, east.episodes, east.reward_sum, east.reward_min, east.reward_max) == (3, 2, 7.0, 1.0, 3.0)
    assert (east.first_ms, east.last_ms, east.env_specs, east.batches) == (5, 20, ("twx:coin", "twx:coin?n=5"),
                                                                          ("batch-1",))
    # The highest reward; of two equal, the latest: a/3 (t=20) over b/1 (t=5); its vector comes along.
    assert (east.representative.id, east.representative.vector) == ("a/3", (1.0, 1.0))
    assert east.reward_mean == pytest.approx(7 / 3) and east.outcome_value_mean == 1.0
    assert from_cold_payload(to_cold_payload(east), [1.0, 1.0]) == east


def test_summaries_merge_exactly_in_any_order() -> None:
    parts = [payload("a", 0, t=10, reward=1.0, outcome=LOST), payload("b", 0, t=30, reward=-2.0, outcome=LOST),
             payload("c", 0, t=20, reward=4.0, outcome=LOST, episode_score=0.5)]
    whole = summarise(members(*parts))
    ((key, one),) = whole.items()
    halves = [summarise(members(p), f"b{i}")[key] for i, p in enumerate(parts)]
    forwards, backwards = merge(merge(halves[0], halves[1]), halves[2]), merge(halves[2], merge(halves[1], halves[0]))
    for merged in (forwards, backwards):
        assert (merged.count, merged.episodes, merged.reward_sum, merged.reward_min, merged.reward_max,
                merged.first_ms, merged.last_ms) == (one.count, one.episodes, one.reward_sum, one.reward_min,
                                                     one.reward_max, one.first_ms, one.last_ms) == (3, 3, 3.0, -2.0,
                                                                                                    4.0, 10, 30)
        assert merged.outcome_value_sum == pytest.approx(one.outcome_value_sum)
        assert merged.representative.id == "c/0"
    assert sorted(forwards.batches) == ["b0", "b1", "b2"]
    with pytest.raises(ValueError, match="cannot merge"):
        merge(halves[0], summarise(members(payload("a", 1, action="look")))[("twx:coin", "move X", "look", "pending")])


def test_a_summary_reads_as_an_experience_flagged_cold() -> None:
    ((_, summary),) = summarise(members(payload("a", 0, reward=1.0, outcome=LOST, episode_score=0.4),
                                        payload("b", 0, reward=-1.0, outcome=LOST, episode_score=0.0))).items()
    unit = summary_experience(summary)
    assert (unit.action, unit.template, unit.outcome, unit.env_family, unit.reward) == (
        "move east", "move X", LOST, "twx:coin", 0.0)
    assert unit.id.startswith("cold:") and unit.metadata["tier"] == "cold" and unit.metadata["count"] == "2"
    # The episode score gives back the mean outcome value: (-0.6 + -1.0) / 2 = -0.8, so 0.2.
    assert unit.episode_score == pytest.approx(0.2)
