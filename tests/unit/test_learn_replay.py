"""Prioritised sampling, the online/offline mix, eviction, durability and idempotency of replay."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from evoskill.common.v1.common_pb2 import Action, Observation, Transition
from evoskill.core.learn import MixedReplay, PrioritizedReplay, episode_examples, policy_version_number
from evoskill.events.v1.events_pb2 import EpisodeCompleted, EpisodeStep
from tests.unit.test_learn_data import make_episode, make_step, take_task_episode


def _one_step(
    episode_id: str, ret: float = 0.0, root_value: float | None = None, won: bool = False
) -> EpisodeCompleted:
    visits = None if root_value is None else [1.0, 0.0]
    step = make_step("g", episode_id, ["a", "b"], 0, reward=ret, visits=visits, root_value=root_value or 0.0)
    return make_episode(episode_id, [step], won=won)


def test_high_priority_steps_are_sampled_more_and_weighted_less() -> None:
    buffer = PrioritizedReplay(100, alpha=1.0, beta=1.0)
    for name in ("low", "high"):
        buffer.add(name, episode_examples(_one_step(name)), version=0)
    buffer.update_priorities([("low", 0), ("high", 0)], [1.0, 9.0])
    examples, keys, weights = buffer.sample(4000, np.random.default_rng(0))
    counts = Counter(k[0] for k in keys)
    assert 0.86 < counts["high"] / 4000 < 0.94  # ∝ priority^α: (9 + eps) / (10 + 2 eps) ≈ 0.9
    by_key = dict(zip((k[0] for k in keys), weights, strict=True))
    assert by_key["low"] == pytest.approx(1.0) and by_key["high"] == pytest.approx(1 / 9, rel=1e-3)
    assert {e.episode_id for e in examples} == {"low", "high"}


def test_new_steps_start_at_their_value_surprise() -> None:
    buffer = PrioritizedReplay(100, eps=0.0)
    buffer.add("surprising", episode_examples(_one_step("surprising", ret=1.0, root_value=-1.0)), version=0)
    buffer.add("expected", episode_examples(_one_step("expected", ret=1.0, root_value=0.9)), version=0)
    buffer.add("unsearched", episode_examples(_one_step("unsearched", ret=1.0)), version=0)
    _, priorities = buffer._view()
    np.testing.assert_allclose(priorities, [2.0, 0.1, 2.0], rtol=1e-6)  # no V from search: the largest seen so far


def test_capacity_evicts_the_oldest_episodes() -> None:
    buffer = PrioritizedReplay(capacity=4)
    rng = np.random.default_rng(0)
    evicted = []
    for i in range(4):  # two steps each
        evicted += buffer.add(f"e{i}", episode_examples(take_task_episode(f"e{i}", rng)), version=i)
    assert evicted == ["e0", "e1"] and buffer.episode_ids == ["e2", "e3"] and len(buffer) == 4


def test_mix_honours_online_fraction() -> None:
    replay = MixedReplay(online_fraction=0.25, seed=1)
    rng = np.random.default_rng(0)
    for i in range(5):
        replay.add(take_task_episode(f"on{i}", rng))
        replay.add(take_task_episode(f"off{i}", rng), offline=True)
    for _ in range(5):
        sample = replay.sample(8)
        assert sample.online == 2 and len(sample.examples) == 8
        assert all(e.episode_id.startswith("on") for e in sample.examples[:2])
        assert all(e.episode_id.startswith("off") for e in sample.examples[2:])


def test_mix_falls_back_to_the_buffer_that_has_data() -> None:
    replay = MixedReplay(online_fraction=0.5)
    replay.add(take_task_episode("off", np.random.default_rng(0)), offline=True)
    sample = replay.sample(6)
    assert sample.online == 0 and len(sample.examples) == 6
    assert MixedReplay().sample(4).examples == []


def test_durable_reopen_restores_the_same_contents(tmp_path: Path) -> None:
    path = tmp_path / "replay.sqlite"
    rng = np.random.default_rng(0)
    replay = MixedReplay(path)
    episodes = [take_task_episode(f"e{i}", rng, version=f"v{i:06d}") for i in range(3)]
    assert replay.add(episodes[0]) and replay.add(episodes[1]) and replay.add(episodes[2], offline=True)
    before = {eid: replay.online.examples(eid) for eid in ("e0", "e1")} | {"e2": replay.offline.examples("e2")}
    replay.close()

    reopened = MixedReplay(path)
    assert reopened.load() == 3
    assert reopened.online.episode_ids == ["e0", "e1"] and reopened.offline.episode_ids == ["e2"]
    assert reopened.online.version_of("e1") == 1
    after = {eid: reopened.online.examples(eid) for eid in ("e0", "e1")} | {"e2": reopened.offline.examples("e2")}
    for eid, examples in after.items():
        assert len(examples) == len(before[eid]) == 2
        for ex, old in zip(examples, before[eid], strict=True):
            assert (ex.step_index, ex.actions, ex.templates, ex.ret, ex.goal, ex.observation, ex.taken) == (
                old.step_index,
                old.actions,
                old.templates,
                old.ret,
                old.goal,
                old.observation,
                old.taken,
            )
            np.testing.assert_array_equal(ex.visit_probs, old.visit_probs)
            np.testing.assert_array_equal(ex.q_values, old.q_values)
    reopened.close()


def test_duplicate_episode_ids_are_ignored_across_restarts_and_evictions(tmp_path: Path) -> None:
    path = tmp_path / "replay.sqlite"
    replay = MixedReplay(path, capacity=1)
    assert replay.add(_one_step("a"))
    assert not replay.add(_one_step("a"))  # a redelivery
    assert not replay.add(_one_step("a"), offline=True)
    assert replay.add(_one_step("b"))  # evicts a
    assert replay.online.episode_ids == ["b"]
    replay.close()

    reopened = MixedReplay(path, capacity=1)
    assert reopened.load() == 1
    assert not reopened.add(_one_step("a")) and not reopened.add(_one_step("b"))
    assert len(reopened) == 1
    reopened.close()
    memory = MixedReplay()
    assert memory.add(_one_step("x")) and not memory.add(_one_step("x"))



def test_episodes_stored_in_the_format_before_steps_were_published_once_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "replay.sqlite"
    replay = MixedReplay(path)
    replay.add(_one_step("now"))
    # The old EpisodeStep: the whole transition in field 1 (reserved now), nothing in the fields that replaced it.
    transition = Transition(action=Action(text="a"), before=Observation(text="o", valid_actions=["a", "b"]))
    old_step = _field(1, transition.SerializeToString()) + EpisodeStep(reward=1.0).SerializeToString()
    old = EpisodeCompleted(episode_id="before").SerializeToString() + _field(5, old_step)
    assert [s.action.text for s in EpisodeCompleted.FromString(old).steps] == [""]
    assert replay._db is not None
    replay._db.execute("INSERT INTO episodes VALUES ('before', 'online', 0, ?)", (old,))
    replay.close()
    reopened = MixedReplay(path)
    assert reopened.load() == 1 and reopened.online.episode_ids == ["now"]
    assert not reopened.add(EpisodeCompleted.FromString(old))  # still known by id: never stored twice
    reopened.close()


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (numbers and lengths below 128 here)."""
    assert number < 16 and len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload

def test_stale_online_episodes_leave_and_successes_are_archived(tmp_path: Path) -> None:
    path = tmp_path / "replay.sqlite"
    replay = MixedReplay(path)
    replay.add(_one_step("old-fail"), version=1)
    replay.add(_one_step("old-win", won=True), version=2)
    replay.add(_one_step("fresh"), version=9)
    assert replay.evict_stale(current_version=10, max_age=3) == 2
    assert replay.online.episode_ids == ["fresh"] and replay.offline.episode_ids == ["old-win"]
    replay.close()
    reopened = MixedReplay(path)
    reopened.load()
    assert reopened.online.episode_ids == ["fresh"] and reopened.offline.episode_ids == ["old-win"]
    assert not reopened.add(_one_step("old-fail"))
    reopened.close()


def test_priorities_route_to_the_right_buffer() -> None:
    replay = MixedReplay()
    replay.add(_one_step("on"))
    replay.add(_one_step("off"), offline=True)
    replay.update_priorities([("off", 0), ("on", 0), ("gone", 0)], [5.0, 2.0, 1.0])
    assert replay.offline._view()[1][0] == pytest.approx(5.0, abs=1e-2)
    assert replay.online._view()[1][0] == pytest.approx(2.0, abs=1e-2)


def test_policy_version_number() -> None:
    assert [policy_version_number(v) for v in ("v000012", "12", "", "policy-v3.onnx")] == [12, 12, 0, 3]


def test_environments_count_the_episodes_in_replay_across_evictions_and_restarts(tmp_path: Path) -> None:
    def played(episode_id: str, env: str, won: bool = False) -> EpisodeCompleted:
        episode = _one_step(episode_id, won=won)
        episode.env_spec = env
        return episode

    path = tmp_path / "replay.sqlite"
    replay = MixedReplay(path, capacity=2)
    replay.add(played("a", "twx:coin"), version=1)
    replay.add(played("b", "twx:coin", won=True), version=1)
    replay.add(played("c", "tw:cook"), version=5)  # evicts a
    replay.add(played("d", "twx:simon"), offline=True)
    assert replay.environments() == {"twx:coin": 1, "tw:cook": 1, "twx:simon": 1}
    replay.evict_stale(current_version=5, max_age=2)  # b, a win, moves to the library: still trained on
    assert replay.environments() == {"twx:coin": 1, "tw:cook": 1, "twx:simon": 1}
    replay.close()
    reopened = MixedReplay(path, capacity=2)
    reopened.load()
    assert reopened.environments() == {"twx:coin": 1, "tw:cook": 1, "twx:simon": 1}
    reopened.close()
