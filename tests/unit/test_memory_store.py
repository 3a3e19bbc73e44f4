"""The experience store on Qdrant local mode in the test's folder (no servers): featuriser guard, MiniLM."""

from __future__ import annotations

from pathlib import Path

import pytest
from qdrant_client import models

from evoskill.memory.store import ExperienceStore, Query, make_featurizer, open_qdrant
from evoskill.memory.v1 import memory_pb2
from evoskill.platform.config import MemorySettings, Settings


def open_store(state_dir: Path, **memory: object) -> ExperienceStore:
    settings = Settings(state_dir=state_dir, memory=MemorySettings(**memory))  # type: ignore[arg-type]
    return ExperienceStore(open_qdrant(settings), settings.qdrant.collection, make_featurizer(settings))


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


def test_text_without_words_is_still_stored_and_found(tmp_path: Path) -> None:
    store = open_store(tmp_path, featurizer="hash")
    store.store([memory_pb2.Experience(goal="?!", action="wait")])  # hashes to a zero vector
    (found,) = store.retrieve(Query(goal="...", state="", limit=3, recall=10))
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
    results = store.retrieve(Query(goal="prepare a meal", state="There is poultry in the fridge.", limit=2, recall=10))
    assert [r.experience.action for r in results] == ["open fridge", "take novel"]
    assert results[0].similarity > results[1].similarity + 0.2
    store.close()
