"""The experience store on Qdrant local mode in the test's folder (no servers): filtered recall, the formula
re-score by reward, outcome and novelty, MMR, alternatives, idempotent writes that keep a known outcome,
payload indexes, the featuriser guard, MiniLM."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from qdrant_client import QdrantClient, models

from evoskill.core.memory import PROFILES, Retrieval, Weights
from evoskill.core.memory.tiers import Limits
from evoskill.memory.query import COLD_INDEXED_FIELDS, INDEXED_FIELDS
from evoskill.memory.store import ExperienceStore, make_featurizer, open_qdrant, vector_name
from evoskill.memory.v1 import memory_pb2
from evoskill.platform import metrics
from evoskill.platform.config import MemorySettings, Settings

Experience = memory_pb2.Experience
WON, LOST, PENDING = memory_pb2.OUTCOME_WON, memory_pb2.OUTCOME_LOST, memory_pb2.OUTCOME_PENDING
GOAL, KITCHEN = "find the golden coin", "you are in the kitchen with a fridge"


def open_store(state_dir: Path, **memory: object) -> ExperienceStore:
    settings = Settings(state_dir=state_dir, memory=MemorySettings(**memory))  # type: ignore[arg-type]
    return ExperienceStore(open_qdrant(settings), settings.qdrant.collection, make_featurizer(settings),
                           disk=settings.qdrant_path)


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = open_store(tmp_path, featurizer="hash")
    yield store
    store.close()


def find(store: ExperienceStore, state: str = KITCHEN, limit: int = 10, recall: int = 20, **fields: Any) -> list[str]:
    retrieval = Retrieval(goal=GOAL, state=state, limit=limit, recall=recall, **fields)
    return [r.experience.action for r in store.retrieve(retrieval)]


def kitchen(action: str, episode: str, **fields: object) -> memory_pb2.Experience:
    return Experience(goal=GOAL, state=KITCHEN, action=action, episode_id=episode, env_spec="twx:coin", **fields)


def test_the_formula_orders_equally_similar_memories_by_reward_outcome_and_novelty(store: ExperienceStore) -> None:
    store.store([kitchen("move east", "a", reward=0.0), kitchen("move north", "b", reward=2.0, outcome=WON),
                 kitchen("move west", "c", reward=-1.0, outcome=LOST)])
    results = store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=3, recall=10))
    assert [r.score for r in results] == pytest.approx([1.0] * 3, abs=1e-5)  # no weights: similarity only
    assert all(r.similarity == pytest.approx(1.0, abs=1e-5) for r in results)
    assert find(store, weights=Weights(reward=0.5)) == ["move north", "move east", "move west"]
    (best, *_) = store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=3, recall=10,
                                          weights=Weights(reward=0.5, outcome=0.25)))
    assert best.score == pytest.approx(1.0 + 0.5 * np.tanh(2.0) + 0.25, abs=1e-5)
    # Novelty against the session: north taken twice keeps 1/3 of its bonus, east once 1/2, west untaken all.
    taken = ("move north", "move east", "move north")
    results = store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=3, recall=10, weights=Weights(novelty=1.0),
                                       taken_actions=taken))
    assert [(r.experience.action, r.score) for r in results] == [
        ("move west", pytest.approx(2.0, abs=1e-5)), ("move east", pytest.approx(1.5, abs=1e-5)),
        ("move north", pytest.approx(1 + 1 / 3, abs=1e-5))]
    # The profiles: stable imitates the won episode; exploratory prefers what the session has not done.
    store.store([kitchen("take coin", "d")])
    assert find(store, weights=PROFILES["stable"], taken_actions=taken)[0] == "move north"
    assert find(store, weights=PROFILES["exploratory"].model_copy(update={"diversity": 0.0}),
                taken_actions=taken)[0] == "take coin"


def test_the_second_stage_only_reorders_what_the_first_recalled(store: ExperienceStore) -> None:
    # A far better reward lifts a dissimilar memory only when the recall reaches it.
    store.store([kitchen("move east", "a"), kitchen("move north", "b"),
                 Experience(goal="sort the books", state="a shelf", action="take book", episode_id="c", reward=50.0)])
    assert sorted(find(store, limit=2, recall=2, weights=Weights(reward=5.0))) == ["move east", "move north"]
    assert find(store, limit=2, recall=3, weights=Weights(reward=5.0))[0] == "take book"


def test_payload_filters_recall_by_environment_family_skill_and_outcome(store: ExperienceStore) -> None:
    store.store([
        kitchen("move east", "a", template="move X", outcome=LOST),
        kitchen("take coin", "b", template="take X", outcome=WON),
        Experience(goal=GOAL, state=KITCHEN, action="open fridge", template="open X", episode_id="c",
                   env_spec="twx:coin?numLocations=5"),
        Experience(goal=GOAL, state=KITCHEN, action="look", episode_id="d", env_spec="twx:cookingworld"),
    ])
    assert sorted(find(store, env_family="twx:coin")) == ["move east", "open fridge", "take coin"]
    assert sorted(find(store, env_spec="twx:coin")) == ["move east", "take coin"]
    assert find(store, template="open X") == ["open fridge"]
    assert sorted(find(store, outcomes=("won", "pending"))) == ["look", "open fridge", "take coin"]
    assert find(store, env_family="twx:coin", outcomes=("lost",)) == ["move east"]
    assert find(store, env_family="tw:nothing") == []


def test_the_spec_filter_is_left_out_only_while_every_point_holds_the_spec(tmp_path: Path) -> None:
    """Local mode checks a filter point by point: where every stored point has the asked spec, the store leaves
    the filter out (same results); a point of another spec, stored now or found at reopening, brings it back."""
    store = open_store(tmp_path, featurizer="hash")
    store.store([kitchen("move east", "a"), kitchen("take coin", "b")])
    assert sorted(find(store, env_spec="twx:coin")) == ["move east", "take coin"]
    assert find(store, env_spec="twx:cookingworld") == []
    store.store([Experience(goal=GOAL, state=KITCHEN, action="look", episode_id="c", env_spec="twx:cookingworld")])
    assert sorted(find(store, env_spec="twx:coin")) == ["move east", "take coin"]
    store.close()
    reopened = open_store(tmp_path, featurizer="hash")
    assert find(reopened, env_spec="twx:cookingworld") == ["look"]
    assert sorted(find(reopened, env_spec="twx:coin")) == ["move east", "take coin"]
    reopened.close()


def test_alternatives_are_other_actions_with_an_acceptable_outcome(store: ExperienceStore) -> None:
    store.store([kitchen("move east", "a", reward=1.0, outcome=WON), kitchen("move north", "b", reward=0.5),
                 kitchen("move west", "c", reward=1.0, outcome=LOST), kitchen("move south", "d", reward=-0.5),
                 kitchen("take coin", "e", reward=0.0, outcome=WON)])
    assert sorted(find(store, alternatives=True, taken_actions=("move east",))) == ["move north", "take coin"]
    assert sorted(find(store, alternatives=True)) == ["move east", "move north", "take coin"]


def test_diversity_spreads_near_duplicates_among_the_scored(store: ExperienceStore) -> None:
    state = "a locked wooden door and a brass key on the floor"
    store.store([*(Experience(goal=GOAL, state=state, action=f"look {i}", episode_id=f"d{i}") for i in range(4)),
                 Experience(goal=GOAL, state="the garden with a wooden gate", action="unlock gate", episode_id="g")])
    assert all(a.startswith("look") for a in find(store, state, limit=2))
    spread = find(store, state, limit=2, weights=Weights(diversity=0.6))
    assert spread[0].startswith("look") and spread[1] == "unlock gate"


def test_a_pending_write_never_replaces_a_known_outcome(store: ExperienceStore) -> None:
    """A step scored after its episode completed, or redelivered, keeps the complete version; re-storing
    is idempotent by episode and step."""
    store.store([kitchen("move east", "ep", step_index=2, reward=1.0)])
    store.store([kitchen("move east", "ep", step_index=2, reward=1.0, outcome=WON, policy_version="v3",
                         env_steps=12)])
    store.store([kitchen("move east", "ep", step_index=2, reward=1.0)] * 2)
    assert store.count() == 1
    (only,) = store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=5, recall=10))
    unit = only.experience
    assert (unit.outcome, unit.policy_version, unit.env_steps, unit.id) == (WON, "v3", 12, "ep/2")
    assert unit.time_unix_ms > 0
    # A known outcome replaces a known one (the latest complete write wins), and pending ones replace pending.
    store.store([kitchen("move east", "ep", step_index=2, outcome=LOST), kitchen("move west", "ep2", reward=1.0),
                 kitchen("move west", "ep2", reward=3.0)])
    assert {(r.experience.action, r.experience.outcome, r.experience.reward)
            for r in store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=5, recall=10))} == {
        ("move east", LOST, 0.0), ("move west", PENDING, 3.0)}


def test_a_completed_episode_replaces_what_a_cut_short_attempt_left_pending(store: ExperienceStore) -> None:
    """An attempt crashed after 3 scored steps; its retry, under the same episode id, completed in 2: the
    third step of the first attempt goes, and a late redelivery of it is not stored again."""
    store.store([kitchen(f"move {i}", "ep", step_index=i) for i in range(3)])
    store.store([kitchen("move 0", "other", step_index=0)])
    assert store.store_episode("ep", [kitchen(f"go {i}", "ep", step_index=i, outcome=WON) for i in range(2)]) == 2
    store.store([kitchen("move 2", "ep", step_index=2), kitchen("move 1", "ep", step_index=1)])
    stored = {(r.experience.episode_id, r.experience.step_index, r.experience.action, r.experience.outcome)
              for r in store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=10, recall=10))}
    assert stored == {("ep", 0, "go 0", WON), ("ep", 1, "go 1", WON), ("other", 0, "move 0", PENDING)}


def test_episodes_completed_together_are_written_with_one_upsert_and_clear_their_pending(
        store: ExperienceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory service's batch of episode.completed: one upsert for every episode, each one's pending steps
    gone (one that stored no step included), and the same batch again changes nothing."""
    store.store([kitchen(f"move {i}", e, step_index=i) for e in ("a", "b", "empty") for i in range(3)])
    upserts: list[int] = []
    upsert = store.client.upsert
    monkeypatch.setattr(store.client, "upsert", lambda *a, **kw: upserts.append(len(kw["points"])) or upsert(*a, **kw))
    batch = [(e, [kitchen(f"go {i}", e, step_index=i, outcome=WON) for i in range(2)]) for e in ("a", "b")]
    assert store.store_episodes([*batch, ("empty", [])]) == 4
    assert upserts == [4]
    stored = {(r.experience.episode_id, r.experience.action, r.experience.outcome)
              for r in store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=10, recall=20))}
    assert stored == {(e, f"go {i}", WON) for e in ("a", "b") for i in range(2)}
    assert store.store_episodes(batch) == 4 and store.count() == 4


def test_payload_indexes_are_made_on_a_server_and_skipped_in_local_mode(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, memory=MemorySettings(featurizer="hash"))  # type: ignore[arg-type]
    created: list[str] = []

    class Recording(QdrantClient):  # local mode's client, counting what a server would be asked to index
        def create_payload_index(self, collection_name: str, field_name: str, *args: Any, **kw: Any) -> Any:
            created.append(field_name)
            return super().create_payload_index(collection_name, field_name, *args, **kw)

    client = Recording(path=str(tmp_path / "q"))
    ExperienceStore(client, "plain", make_featurizer(settings))
    assert created == []
    with pytest.warns(UserWarning, match="Payload indexes have no effect"):
        ExperienceStore(client, "indexed", make_featurizer(settings), indexed=True)
    assert created == list(INDEXED_FIELDS) + list(COLD_INDEXED_FIELDS)  # the hot collection's, the cold one's
    client.close()


def test_a_collection_refuses_a_different_featuriser(tmp_path: Path) -> None:
    store = open_store(tmp_path, featurizer="hash", hash_dim=384)
    store.store([memory_pb2.Experience(goal="find the coin", state="kitchen", action="move east")])
    store.close()
    with pytest.raises(RuntimeError, match="hash128"):
        open_store(tmp_path, featurizer="hash", hash_dim=128)
    store = open_store(tmp_path, featurizer="hash", hash_dim=384)
    assert store.count() == 1
    store.close()


def test_an_empty_collection_from_the_release_before_memory_is_replaced(tmp_path: Path) -> None:
    """That release's memory service only created the collection (one unnamed vector, no points)."""
    settings = Settings(state_dir=tmp_path, memory=MemorySettings(featurizer="hash"))  # type: ignore[arg-type]
    client = open_qdrant(settings)
    params = models.VectorParams(size=384, distance=models.Distance.COSINE)
    client.create_collection(settings.qdrant.collection, vectors_config=params)
    client.close()
    store = open_store(tmp_path, featurizer="hash")
    store.store([memory_pb2.Experience(goal="find the coin", state="kitchen", action="move east")])
    assert store.count() == 1
    store.close()


def test_a_cosine_collection_of_an_earlier_release_scores_as_the_dot_product_one(tmp_path: Path) -> None:
    """New collections score by dot product on unit vectors (local mode re-normalises every stored vector at each
    cosine query); one made with cosine by an earlier release gives the same similarities and order."""
    stores = []
    for name, distance in (("dot", None), ("cosine", models.Distance.COSINE)):
        if distance is not None:
            settings = Settings(state_dir=tmp_path / name, memory=MemorySettings(featurizer="hash"))  # type: ignore[arg-type]
            client = open_qdrant(settings)
            vector = vector_name(make_featurizer(settings))
            params = models.VectorParams(size=384, distance=distance)
            client.create_collection(settings.qdrant.collection, vectors_config={vector: params})
            client.close()
        store = open_store(tmp_path / name, featurizer="hash")
        store.store([Experience(goal=GOAL, state=state, action=action, episode_id=action, env_spec="twx:coin")
                     for state, action in ((KITCHEN, "move east"), ("a hallway with a coin", "move north"),
                                           ("the kitchen, a fridge, a knife", "open fridge"))])
        stores.append(store)
    dot, cosine = ([(r.experience.action, r.similarity) for r in s.retrieve(
        Retrieval(goal=GOAL, state="in the kitchen: a fridge", limit=3, recall=10))] for s in stores)
    assert [a for a, _ in dot] == [a for a, _ in cosine] and len(dot) == 3
    assert [x for _, x in dot] == pytest.approx([x for _, x in cosine], abs=1e-6)
    assert dot[0][1] < 1.0  # similarities, not raw dot products of unnormalised hashes
    made = stores[0].client.get_collection(stores[0].collection).config.params.vectors
    assert made[stores[0].vector].distance == models.Distance.DOT  # type: ignore[index]
    for s in stores:
        s.close()


def test_text_without_words_is_still_stored_and_found(tmp_path: Path) -> None:
    store = open_store(tmp_path, featurizer="hash")
    store.store([memory_pb2.Experience(goal="?!", action="wait")])  # hashes to a zero vector
    (found,) = store.retrieve(Retrieval(goal="...", state="", limit=3, recall=10))
    assert found.experience.action == "wait"
    store.close()


@pytest.mark.slow  # exports MiniLM to ONNX (~9 s on 2 busy cores): pytest -m slow tests/unit/test_memory_store.py
def test_minilm_finds_the_same_situation_in_other_words(tmp_path: Path) -> None:
    store = open_store(tmp_path, featurizer="minilm")
    store.store([
        memory_pb2.Experience(goal="cook dinner", state="The refrigerator holds a raw chicken.", action="open fridge",
                              episode_id="a"),
        memory_pb2.Experience(goal="sort the books", state="A shelf with three novels.", action="take novel",
                              episode_id="b"),
    ])
    results = store.retrieve(Retrieval(goal="prepare a meal", state="There is poultry in the fridge.", limit=2,
                                       recall=10))
    assert [r.experience.action for r in results] == ["open fridge", "take novel"]
    assert results[0].similarity > results[1].similarity + 0.2
    store.close()


# -- tiers: compaction into the cold collection -------------------------------------------------------------

DAY_MS = 86_400_000
OLD_MS = 1_700_000_000_000  # a fixed past: every limit's "now" below is relative to it
COLD_LIMITS = Limits(hot_max=4, min_age_ms=DAY_MS)


def episode(name: str, steps: int, outcome: int = WON, t: int = OLD_MS, **fields: Any) -> list[Experience]:
    return [kitchen(f"move {i % 2}", name, step_index=i, outcome=outcome, reward=float(i), time_unix_ms=t + i,
                    **fields) for i in range(steps)]


def totals(store: ExperienceStore) -> tuple[int, int, int]:
    """(experiences summarised, hot, summarised + hot)."""
    stats = store.stats()
    return stats.summarised, stats.hot.points, stats.summarised + stats.hot.points


def test_compaction_keeps_the_totals_and_a_redelivered_write_is_never_stored_twice(store: ExperienceStore) -> None:
    stored = [*episode("a", 3, t=OLD_MS), *episode("b", 2, t=OLD_MS + 10), *episode("c", 3, t=OLD_MS + 20),
              *episode("young", 2, t=OLD_MS + 30 * DAY_MS)]
    store.store(stored)
    now = OLD_MS + 30 * DAY_MS + 1000
    # 10 hot, at most 4: a and b (the oldest) go, c too (still 5 over), young is under a day old.
    assert store.compact(COLD_LIMITS, batch=3, now_ms=now) == (8, 3, {"count": 3})
    assert totals(store) == (8, 2, len(stored))
    stats = store.stats()
    assert (stats.summarised_episodes, stats.compactions, stats.last_moved, stats.last_compaction_unix_ms) == (
        3, 1, 8, now)
    assert stats.cold.points == 2  # (twx:coin, "", move 0 | move 1, won)
    assert (stats.cold.oldest_unix_ms, stats.cold.newest_unix_ms) == (OLD_MS, OLD_MS + 22)
    assert stats.hot.oldest_unix_ms == OLD_MS + 30 * DAY_MS and stats.hot.bytes > 0 and stats.cold.bytes > 0
    # Idempotent: nothing more to move; redelivered writes of cold episodes (pending or complete) are refused.
    assert store.compact(COLD_LIMITS, batch=3, now_ms=now) == (0, 0, {})
    assert store.store(episode("a", 3)) == 0 and store.store([kitchen("move 0", "b", step_index=0)]) == 0
    assert store.store_episode("c", episode("c", 3)) == 0
    assert totals(store) == (8, 2, len(stored)) and store.stats().compactions == 1
    # A later compaction merges into the same summaries: counts add up, never double. Whole episodes: to
    # hold at most 1, young's two go as well.
    store.store(episode("d", 4, t=OLD_MS + 40))
    assert store.compact(Limits(hot_max=1), batch=100, now_ms=now) == (6, 2, {"count": 2})
    assert totals(store) == (14, 0, len(stored) + 4) and store.stats().cold.points == 2


@pytest.mark.parametrize(("step", "nth"), [
    ("upsert", 2),  # the summaries (after recording the episodes as moving)
    ("delete", 1),  # dropping them from hot (after the summaries)
    ("set_payload", 1),  # recording them as cold (after dropping them)
])
def test_a_compaction_cut_short_is_finished_at_the_next_open_without_counting_twice(tmp_path: Path, step: str,
                                                                                  nth: int) -> None:
    store = open_store(tmp_path, featurizer="hash")
    store.store([*episode("a", 3), *episode("b", 3, t=OLD_MS + 5)])
    real, calls = getattr(store.client, step), []

    def crash(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == nth:
            raise RuntimeError("killed")
        return real(*args, **kwargs)

    setattr(store.client, step, crash)
    with pytest.raises(RuntimeError, match="killed"):
        store.compact(Limits(hot_max=1), batch=100, now_ms=OLD_MS + 10 * DAY_MS)
    setattr(store.client, step, real)
    assert store.store(episode("a", 3)) == 0  # moving: refused already
    store.close()
    store = open_store(tmp_path, featurizer="hash")  # finishes the batch, merging each summary once
    assert totals(store) == (6, 0, 6) and store.stats().summarised_episodes == 2
    assert store.compact(Limits(hot_max=1), batch=100, now_ms=OLD_MS + 10 * DAY_MS) == (0, 0, {})
    assert totals(store) == (6, 0, 6)
    store.close()


def test_low_value_and_old_episodes_go_cold_and_purge_empties_both_tiers(store: ExperienceStore) -> None:
    store.store([*episode("lost", 2, outcome=LOST, t=OLD_MS + 50), *episode("won", 2, t=OLD_MS + 60),
                 *episode("ancient", 1, t=OLD_MS - 40 * DAY_MS)])
    store.store([kitchen("move west", "lost", step_index=0, outcome=LOST, reward=-2.0, time_unix_ms=OLD_MS + 50),
                 kitchen("move west", "lost", step_index=1, outcome=LOST, reward=-1.0, time_unix_ms=OLD_MS + 51)])
    limits = Limits(max_age_ms=30 * DAY_MS, low_value_below=-0.5, min_age_ms=DAY_MS)
    assert store.compact(limits, batch=10, now_ms=OLD_MS + 2 * DAY_MS) == (3, 2, {"age": 1, "low_value": 1})
    assert {u.episode_id for u in store.page([], 10, None)[0]} == {"won"}
    assert store.delete([]) == 2
    stats = store.stats()
    assert (stats.hot.points, stats.cold.points, stats.summarised, stats.compactions) == (0, 0, 0, 0)


def test_compactions_are_counted_with_what_they_summarised_and_wrote(store: ExperienceStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.use_meter_provider(provider)
    try:
        store.store([*episode("lost", 2, outcome=LOST, t=OLD_MS), *episode("won", 3, t=OLD_MS + 10)])
        limits = Limits(hot_max=1, min_age_ms=DAY_MS)
        assert store.compact(limits, batch=10, now_ms=OLD_MS + 2 * DAY_MS) == (5, 2, {"count": 2})
        assert store.compact(limits, batch=10, now_ms=OLD_MS + 2 * DAY_MS) == (0, 0, {})
        summaries = store.stats().cold.points

        def down(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("Qdrant unreachable")

        monkeypatch.setattr(store.client, "scroll", down)
        with pytest.raises(ConnectionError):
            store.compact(limits, batch=10)
        data = reader.get_metrics_data()
        # only the memory's instruments: a service another test left running may report to the same provider
        found = {(m.name, tuple(sorted(p.attributes.items()))): p.value for r in data.resource_metrics
                 for s in r.scope_metrics for m in s.metrics for p in m.data.data_points
                 if m.name.startswith("evoskill.memory.")}
    finally:
        metrics.use_meter_provider(None)
        provider.shutdown()
    assert summaries > 0 and found == {
        (metrics.MEMORY_COMPACTIONS, (("outcome", "ok"),)): 2,
        (metrics.MEMORY_COMPACTIONS, (("outcome", "failed"),)): 1,
        (metrics.MEMORY_SUMMARISED, ()): 5,
        (metrics.MEMORY_COLD_EPISODES, (("reason", "count"),)): 2,
        (metrics.MEMORY_SUMMARIES, ()): summaries,
    }


def test_retrieval_fills_from_cold_summaries_when_hot_has_too_few(store: ExperienceStore) -> None:
    store.store([*episode("a", 4, t=OLD_MS), *episode("b", 2, outcome=LOST, t=OLD_MS + 1),
                 kitchen("take coin", "fresh", outcome=WON, time_unix_ms=OLD_MS + 30 * DAY_MS)])
    store.compact(COLD_LIMITS, batch=100, now_ms=OLD_MS + 30 * DAY_MS + 1)  # a and b go: 3 summaries
    retrieval = Retrieval(goal=GOAL, state=KITCHEN, limit=3, recall=10, cold_fill=True,
                          weights=Weights(reward=0.1, outcome=0.5))
    results = store.retrieve(retrieval)
    (first, *cold) = results
    assert (first.experience.action, first.cold) == ("take coin", False)
    assert len(cold) == 2 and all(r.cold and r.experience.metadata["tier"] == "cold" for r in cold)
    # The won ones first (outcome), then by 0.1 * tanh(mean reward): move 1 (steps 1, 3: mean 2) over move 0.
    assert [(r.experience.action, r.experience.outcome, r.summarised) for r in cold] == [
        ("move 1", WON, 2), ("move 0", WON, 2)]
    assert cold[0].score == pytest.approx(cold[0].similarity + 0.1 * np.tanh(2.0) + 0.5, abs=1e-5)
    # The same filters hold in cold: only the lost summaries; none without cold_fill.
    lost = store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=5, recall=10, cold_fill=True,
                                    outcomes=("lost",), env_spec="twx:coin"))
    assert sorted((r.experience.action, r.summarised, r.cold) for r in lost) == [
        ("move 0", 1, True), ("move 1", 1, True)]
    assert not any(r.cold for r in store.retrieve(Retrieval(goal=GOAL, state=KITCHEN, limit=5, recall=10)))
