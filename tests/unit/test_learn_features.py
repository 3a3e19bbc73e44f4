"""Featurisers: hashing (default), the LRU cache, and MiniLM offline on onnxruntime (slow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evoskill.core.learn import CachedFeaturizer, HashingFeaturizer, featurizer_from_spec


def test_hashing_is_unit_norm_deterministic_and_float32() -> None:
    texts = ["Take the apple from the fridge.", "open door", ""]
    a = HashingFeaturizer(64).encode(texts)
    b = HashingFeaturizer(64).encode(texts)  # a fresh instance (or process) encodes identically
    assert a.dtype == np.float32 and a.shape == (3, 64)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a[:2], axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(a[2], 0.0)


def test_hashing_similar_texts_are_closer() -> None:
    v = HashingFeaturizer(256).encode(["take the red apple", "take the apple", "go north through the door"])
    assert v[0] @ v[1] > 0.5 > abs(v[0] @ v[2])


def test_hashing_sees_word_order_through_bigrams() -> None:
    v = HashingFeaturizer(256).encode(["put knife on table", "put table on knife"])
    assert v[0] @ v[1] < 0.999


class _Counting:
    def __init__(self) -> None:
        self.inner = HashingFeaturizer(8)
        self.calls: list[list[str]] = []

    @property
    def dim(self) -> int:
        return 8

    @property
    def spec(self) -> dict[str, Any]:
        return self.inner.spec

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.encode(texts)


def test_cache_encodes_each_text_once_in_one_call() -> None:
    inner = _Counting()
    cached = CachedFeaturizer(inner, maxsize=10)
    first = cached.encode(["a", "b", "a"])
    second = cached.encode(["b", "a", "c"])
    assert inner.calls == [["a", "b"], ["c"]]
    np.testing.assert_array_equal(first[0], second[1])
    np.testing.assert_array_equal(second, inner.inner.encode(["b", "a", "c"]))
    assert (cached.hits, cached.misses) == (2, 3)  # rows served from the cache, texts encoded


def test_cache_evicts_least_recently_used() -> None:
    inner = _Counting()
    cached = CachedFeaturizer(inner, maxsize=2)
    cached.encode(["a", "b"])
    cached.encode(["a"])  # refreshes a; b is now the oldest
    cached.encode(["c"])  # evicts b
    cached.encode(["a", "b"])
    assert inner.calls[-1] == ["b"]


def test_featurizer_from_spec() -> None:
    f = featurizer_from_spec({"kind": "hash", "dim": 32})
    assert f.dim == 32 and f.spec == {"kind": "hash", "dim": 32}
    with pytest.raises(ValueError, match="unknown featuriser"):
        featurizer_from_spec({"kind": "bag-of-vibes"})
    with pytest.raises(ValueError, match="cache_dir"):
        featurizer_from_spec({"kind": "minilm"})


def test_minilm_offline_embeds_two_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a download attempt would fail rather than hang
    from evoskill.core.learn import MiniLMFeaturizer

    featurizer = MiniLMFeaturizer(tmp_path)
    assert (tmp_path / MiniLMFeaturizer.ONNX_NAME).exists()
    v = featurizer.encode(["Take the apple from the fridge.", "Grab the apple out of the refrigerator."])
    assert v.shape == (2, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > 0.6
    assert featurizer.encode(["The stock market fell."])[0] @ v[0] < 0.3


@pytest.mark.slow
def test_minilm_onnx_matches_sentence_transformers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from evoskill.core.learn import MiniLMFeaturizer
    from evoskill.core.learn.features import minilm_model_dir

    texts = ["a", "You are in the kitchen. There is a fridge and a counter with a knife on it.", "open door"]
    v = MiniLMFeaturizer(tmp_path).encode(texts)  # padded together: the mask must hide the padding
    reference = SentenceTransformer(str(minilm_model_dir()), device="cpu").encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(v, reference, atol=1e-5)
    np.testing.assert_allclose(MiniLMFeaturizer(tmp_path).encode(texts[1:2])[0], v[1], atol=1e-5)  # cached export
