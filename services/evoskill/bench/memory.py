"""`evoskill bench memory`: the experience store's write throughput, retrieval latency and exactness at growing
sizes, on Qdrant local mode (the memory service's own code path, memory/store.py) and, when `qdrant-edge-py`
is installed, on Qdrant Edge (the in-process engine) fed the same points and asked the same two-stage query.

Experiences are generated text (goals, rooms, objects, exits), embedded by the memory's hashed n-gram
featuriser (memory.featurizer=hash): MiniLM's ~10 ms a text would spend minutes on 50k texts before measuring
anything. Each size is reached by adding to the previous one; writes/s is over the writes of that step.

Latency: one `ExperienceStore.retrieve` (query embedding, one prefetch + formula query with the "stable"
profile, the cosines and MMR pick) per query text. Recall@10: a similarity-only retrieval (zero weights, so
the formula keeps the prefetch's order) against exact cosine over every stored vector in numpy; a stored
experience as similar as the true 10th counts as a hit (ties have no order).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evoskill.core.memory import PROFILES, Retrieval, Weights, cosines, from_payload, mmr, query_text
from evoskill.memory.query import prefetch, rescore
from evoskill.memory.v1 import memory_pb2
from evoskill.platform.provenance import write_report

ROOMS = ("kitchen", "pantry", "garden", "cellar", "attic", "hallway", "bedroom", "study", "barn", "shed",
         "porch", "library", "bathroom", "workshop", "greenhouse", "stable", "lobby", "vault", "gallery", "yard")
THINGS = ("apple", "knife", "lamp", "coin", "book", "key", "bread", "carrot", "onion", "pepper", "chest", "map",
          "rope", "candle", "bottle", "hammer", "shovel", "basket", "mirror", "clock", "potato", "egg", "milk",
          "cheese", "fork", "plate", "bowl", "towel", "box", "letter", "ring", "scroll", "coat", "boot", "hat")
EXITS = ("north", "south", "east", "west")
GOALS = ("find the {0}", "cook a meal with the {0} and the {1}", "put the {0} in the {2}", "take the {0} to the {2}",
         "open the {1} with the {0}")
VERBS = ("take", "open", "examine", "drop", "cut", "eat")
BATCH = 256
LATENCY_PROFILE = "stable"
RECALL = 50  # first-stage candidates of the latency query (memory.recall's default)
K = 10


def experience_text(rng: np.random.Generator) -> tuple[str, str]:
    """A goal and a state like the environments' (a room, what lies there, the exits)."""
    a, b, c = (str(x) for x in rng.choice(THINGS, 3, replace=False))
    room = str(rng.choice(ROOMS))
    goal = str(rng.choice(GOALS)).format(a, b, str(rng.choice(ROOMS)))
    seen = ", a ".join(str(x) for x in rng.choice(THINGS, int(rng.integers(1, 5)), replace=False))
    exits = " and ".join(str(x) for x in rng.choice(EXITS, int(rng.integers(1, 3)), replace=False))
    return goal, f"You are in the {room}. You see a {seen}. Exits: {exits}. You carry a {c}."


def experiences(start: int, stop: int, seed: int = 0) -> list[memory_pb2.Experience]:
    rng = np.random.default_rng([seed, start])
    units = []
    for i in range(start, stop):
        goal, state = experience_text(rng)
        won = bool(rng.random() < 0.4)
        units.append(memory_pb2.Experience(
            goal=goal, state=state, action=f"{rng.choice(VERBS)} {rng.choice(THINGS)}", env_spec="bench:memory",
            episode_id=f"bench-{i // 20}", step_index=i % 20, reward=float(rng.normal()),
            outcome=memory_pb2.OUTCOME_WON if won else memory_pb2.OUTCOME_LOST, episode_score=float(won)))
    return units


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000, q))


def recall_at_k(returned: Sequence[int], exact: np.ndarray, k: int = K) -> float:
    """Hits among the `k` returned: rows whose exact cosine reaches the true k-th best (ties count)."""
    kth = np.partition(-exact, k - 1)[k - 1] * -1
    return min(sum(1 for i in returned[:k] if exact[i] >= kth - 1e-5), k) / k


@dataclass
class Row:
    size: int
    engine: str
    writes_per_s: float
    p50_ms: float
    p99_ms: float
    recall_at_10: float
    similarity_p50_ms: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "engine": self.engine, "writes_per_s": round(self.writes_per_s, 1),
                "retrieve_p50_ms": round(self.p50_ms, 3), "retrieve_p99_ms": round(self.p99_ms, 3),
                "recall_at_10": round(self.recall_at_10, 4), "similarity_only_p50_ms": round(self.similarity_p50_ms, 3),
                **self.extra}


class LocalEngine:
    """The memory service's store on Qdrant local mode: writes and retrievals exactly as the service does them."""

    name = "qdrant-local"

    def __init__(self, folder: Path, on_disk: bool = True) -> None:
        """`on_disk`: local mode under a folder, as the service opens it (every upsert also goes to SQLite);
        else in memory (":memory:"): the same search, without the persistence."""
        from qdrant_client import QdrantClient

        from evoskill.memory.store import ExperienceStore, make_featurizer
        from evoskill.platform.config import MemorySettings, Settings

        settings = Settings(state_dir=folder, memory=MemorySettings(featurizer="hash"))
        client = QdrantClient(path=str(folder / "qdrant")) if on_disk else QdrantClient(location=":memory:")
        self.store = ExperienceStore(client, "bench", make_featurizer(settings))

    def write(self, units: list[memory_pb2.Experience]) -> None:
        self.store.store(units)

    def settle(self) -> dict[str, Any]:
        return {"search": "exact"}  # local mode scores every stored vector (numpy)

    def retrieve(self, retrieval: Retrieval) -> list[memory_pb2.ScoredExperience]:
        return self.store.retrieve(retrieval)

    def close(self) -> None:
        self.store.close()


class EdgeEngine:
    """Qdrant Edge (an in-process shard) given the store's own points (same embedding and payload) and the
    store's own prefetch + formula, translated to Edge's types; then the same cosines and MMR pick."""

    name = "qdrant-edge"

    def __init__(self, folder: Path, points_of: Callable[[list[memory_pb2.Experience]], list[Any]],
                 embed: Callable[[list[str]], np.ndarray], vector: str, dim: int) -> None:
        import qdrant_edge as qe

        self.qe, self.points_of, self.embed, self.vector = qe, points_of, embed, vector
        config = qe.EdgeConfig(vectors={vector: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)})
        self.shard = qe.EdgeShard.create(str(folder / "edge"), config)

    def write(self, units: list[memory_pb2.Experience]) -> None:
        points = [self.qe.Point(id=str(p.id), vector=p.vector, payload=p.payload) for p in self.points_of(units)]
        self.shard.update(self.qe.UpdateOperation.upsert_points(points))

    def settle(self) -> dict[str, Any]:
        """Let Edge build its index (HNSW above its indexing threshold) before searching, as a service would."""
        start = time.perf_counter()
        self.shard.optimize()
        info = self.shard.info()
        indexed = int(info.indexed_vectors_count)
        return {"optimize_s": round(time.perf_counter() - start, 2), "indexed_vectors": indexed,
                "search": "HNSW" if indexed else "exact"}  # plain below Edge's indexing threshold

    def retrieve(self, retrieval: Retrieval) -> list[memory_pb2.ScoredExperience]:
        qe = self.qe
        (vector,) = self.embed([query_text(retrieval.goal, retrieval.state)])
        first = prefetch(retrieval, vector.tolist(), self.vector)
        if first.filter is not None:
            raise ValueError("the bench's Edge engine translates no payload filter")
        formula = rescore(retrieval)
        diversity = retrieval.weights.diversity
        hits = self.shard.query(qe.QueryRequest(
            limit=retrieval.candidates if diversity else retrieval.limit,
            prefetches=[qe.Prefetch(limit=first.limit or retrieval.candidates,
                                    query=qe.Query.Nearest(vector.tolist(), using=self.vector))],
            query=qe.Formula(edge_expression(qe, formula.formula), defaults=formula.defaults),
            with_payload=True, with_vector=True))
        if not hits:
            return []
        vectors = np.array([hit.vector[self.vector] for hit in hits])
        scores = np.array([hit.score for hit in hits])
        similarities = cosines(vector, vectors)
        return [memory_pb2.ScoredExperience(experience=from_payload(hits[i].payload or {}), score=float(scores[i]),
                                            similarity=float(similarities[i]))
                for i in mmr(scores, vectors, diversity, retrieval.limit)]

    def close(self) -> None:
        self.shard.close()


def edge_expression(qe: Any, expression: Any) -> Any:
    """memory/query.py's formula (variables, constants, sums, products) as a Qdrant Edge expression."""
    from qdrant_client import models

    e = qe.Expression
    if isinstance(expression, str):
        return e.Variable(expression)
    if isinstance(expression, int | float):
        return e.Constant(float(expression))
    if isinstance(expression, models.SumExpression):
        return e.Sum([edge_expression(qe, x) for x in expression.sum])
    if isinstance(expression, models.MultExpression):
        return e.Mult([edge_expression(qe, x) for x in expression.mult])
    raise ValueError(f"the bench does not translate {type(expression).__name__} to Qdrant Edge")


def edge_available() -> str:
    """Empty when qdrant-edge-py imports, else why not."""
    try:
        import qdrant_edge  # noqa: F401
    except ImportError as exc:
        return f"qdrant-edge-py is not installed ({exc}); `pip install qdrant-edge-py` adds it"
    return ""


def measure(engine: Any, size: int, writes_s: float, queries: list[tuple[str, str]], exact: np.ndarray,
            settled: dict[str, Any]) -> Row:
    profile, similarity_only = PROFILES[LATENCY_PROFILE], Weights()
    for goal, state in queries[:5]:  # warm-up (first-call allocations)
        engine.retrieve(Retrieval(goal=goal, state=state, limit=K, recall=RECALL, weights=profile))
    latencies, cpu, similarity_latencies, recalls = [], [], [], []
    for q, (goal, state) in enumerate(queries):
        start, cpu_start = time.perf_counter(), time.process_time()
        engine.retrieve(Retrieval(goal=goal, state=state, limit=K, recall=RECALL, weights=profile))
        latencies.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)
        start = time.perf_counter()
        results = engine.retrieve(Retrieval(goal=goal, state=state, limit=K, recall=K, weights=similarity_only))
        similarity_latencies.append(time.perf_counter() - start)
        returned = [r.experience.step_index + 20 * int(r.experience.episode_id.rsplit("-", 1)[1]) for r in results]
        recalls.append(recall_at_k(returned, exact[q]))
    return Row(size, engine.name, writes_s, percentile_ms(latencies, 50), percentile_ms(latencies, 99),
               float(np.mean(recalls)), percentile_ms(similarity_latencies, 50),
               settled | {"retrieve_cpu_p50_ms": round(percentile_ms(cpu, 50), 3),
                          "retrieve_cpu_p99_ms": round(percentile_ms(cpu, 99), 3)})


def run_memory_bench(json_path: Path | None, sizes: Sequence[int], queries: int, work_dir: Path | None,
                     engines: Sequence[str] = ("local", "edge"), say: Callable[[str], None] = print,
                     local_on_disk: bool = True) -> dict[str, Any]:
    if not sizes or any(b <= a for a, b in itertools.pairwise(sizes)) or sizes[0] < K:
        raise ValueError(f"sizes must be increasing and at least {K}, got {list(sizes)}")
    folder = Path(tempfile.mkdtemp(prefix="bench-memory-", dir=work_dir))
    load_before = os.getloadavg()[0]
    why_no_edge = edge_available() if "edge" in engines else "not asked for"
    try:
        local = LocalEngine(folder / "local", local_on_disk)
        store = local.store
        running: list[Any] = [local]
        if not why_no_edge:
            (folder / "edge-shard").mkdir()
            running.append(EdgeEngine(folder / "edge-shard", store._points, store._embed, store.vector,
                                      store.featurizer.dim))
        rng = np.random.default_rng(12345)
        query_texts = [experience_text(rng) for _ in range(queries)]
        query_vectors = store._embed([query_text(g, s) for g, s in query_texts])
        query_unit = query_vectors / np.linalg.norm(query_vectors, axis=1, keepdims=True)
        stored = np.zeros((0, store.featurizer.dim), dtype=np.float32)
        rows: list[Row] = []
        for size in sizes:
            units = experiences(len(stored), size)
            vectors = store._embed([query_text(u.goal, u.state) for u in units])
            stored = np.vstack([stored, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)])
            start = time.perf_counter()
            exact = query_unit @ stored.T  # numpy brute force: the true cosines
            numpy_ms = (time.perf_counter() - start) * 1000 / queries
            for engine in running:
                start, cpu_start = time.perf_counter(), time.process_time()
                for i in range(0, len(units), BATCH):
                    engine.write(units[i:i + BATCH])
                writes_s = len(units) / (time.perf_counter() - start)
                writes_cpu = len(units) / max(time.process_time() - cpu_start, 1e-9)
                settled = engine.settle() | {"numpy_brute_force_ms_per_query": round(numpy_ms, 3),
                                             "writes_per_cpu_s": round(writes_cpu, 1)}
                rows.append(measure(engine, size, writes_s, query_texts, exact, settled))
                say(f"{size:>6} {engine.name}: {rows[-1].writes_per_s:.0f} writes/s, p50 {rows[-1].p50_ms:.2f} ms, "
                    f"p99 {rows[-1].p99_ms:.2f} ms, recall@10 {rows[-1].recall_at_10:.3f}")
        for engine in running:
            engine.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary = {
        "code_path": "evoskill.memory.store.ExperienceStore (store, retrieve) on Qdrant local mode; Qdrant Edge fed "
                     "ExperienceStore._points and memory/query.py's prefetch + formula (bench/memory.py)",
        "featurizer": f"hash{store.featurizer.dim} (memory.featurizer=hash) on generated experience texts",
        "local_storage": "on disk (as the service)" if local_on_disk else "in memory (:memory:, no SQLite writes)",
        "queries": queries, "latency_profile": LATENCY_PROFILE, "latency_recall": RECALL, "k": K,
        "edge": "measured" if not why_no_edge else f"not measured: {why_no_edge}",
        # Timings are wall-clock: on a loaded machine they measure the machine as much as the store.
        "machine": {"cpus": os.cpu_count(), "load_avg_1m_before": round(load_before, 1),
                    "load_avg_1m_after": round(os.getloadavg()[0], 1)},
        "rows": [r.to_json() for r in rows], "ratios": ratios(rows),
    }
    if json_path is not None:
        from evoskill.platform.config import Settings

        write_report(json_path, summary, Settings())  # with its `run`: revision, versions, settings
    return summary


def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """Edge against local mode per size: >1 = Edge writes more per second, answers faster."""
    out = []
    for size in sorted({r.size for r in rows}):
        by = {r.engine: r for r in rows if r.size == size}
        if {"qdrant-local", "qdrant-edge"} <= by.keys():
            local, edge = by["qdrant-local"], by["qdrant-edge"]
            out.append({"size": size, "edge_writes_x": round(edge.writes_per_s / local.writes_per_s, 2),
                        "edge_p50_speedup_x": round(local.p50_ms / edge.p50_ms, 2),
                        "edge_p99_speedup_x": round(local.p99_ms / edge.p99_ms, 2)})
    return out


def print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("experiences", "engine", "writes/s", "p50 ms", "p99 ms", "CPU p50/p99 ms", "recall@10", "search",
                  title=f"memory: {summary['queries']} queries, profile {summary['latency_profile']}, "
                        f"{summary['featurizer']}")
    for r in summary["rows"]:
        table.add_row(f"{r['size']:,}", r["engine"], f"{r['writes_per_s']:,.0f}", f"{r['retrieve_p50_ms']:.2f}",
                      f"{r['retrieve_p99_ms']:.2f}", f"{r['retrieve_cpu_p50_ms']:.2f}/{r['retrieve_cpu_p99_ms']:.2f}",
                      f"{r['recall_at_10']:.3f}", r["search"])
    for x in summary["ratios"]:
        table.add_row(f"{x['size']:,}", "edge vs local", f"{x['edge_writes_x']}×", f"{x['edge_p50_speedup_x']}× faster",
                      f"{x['edge_p99_speedup_x']}× faster", "", "", "")
    console = Console(width=160)
    console.print(table)
    if summary["edge"] != "measured":
        console.print(f"Qdrant Edge {summary['edge']}")
