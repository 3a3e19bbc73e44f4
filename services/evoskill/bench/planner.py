"""Planner benchmark: one synthetic search problem, three MCTS implementations, one process.

The problem: a tree of fixed branching and depth; node ids are path hashes (child = node * (b+1) +
a + 1, mod 2^32); prior logits and values are a 32-bit hash of the ids (the same in numpy/numba and
JAX, bit for bit); rewards are 0; nodes at `depth` are terminal. All three run PUCT with the same
constant, raw Q and Q = 0 for unvisited children, no noise, no transpositions (mctx has none), one
leaf per network call (mctx batch size 1), so the visit counts they return should agree.
evoskill runs twice: compiled (`search_compiled`, step and evaluate as numba functions, as mctx
takes jitted ones) and with Python callbacks (`search`).

    python -m evoskill.bench.planner --json bench-planner.json
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from evoskill.bench import mctx_baseline
from evoskill.bench.naive_mcts import naive_search, root_visits
from evoskill.core.search import Evaluation, Root, SearchConfig, Transition, search, search_compiled
from evoskill.core.search.jit import jit
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

MASK = 0xFFFFFFFF
SALT = mctx_baseline.SALT
C_PUCT = 1.25
BATCHED = 16  # leaves per network call in the batched evoskill row


@jit
def _mix32(x: Any) -> Any:
    """lowbias32 (Chris Wellons' integer hash) on a uint64 holding 32 bits."""
    mask = np.uint64(MASK)
    x = x ^ (x >> np.uint64(16))
    x = (x * np.uint64(0x7FEB352D)) & mask
    x = x ^ (x >> np.uint64(15))
    x = (x * np.uint64(0x846CA68B)) & mask
    return x ^ (x >> np.uint64(16))


@jit
def _unit(x: Any) -> float:
    """A hash as a float in [0, 1) with 24 bits, exact in float32 and float64."""
    return float(_mix32(x) >> np.uint64(8)) * 2.0**-24


@jit
def evaluate_node(node: Any, branching: int, logits: np.ndarray) -> float:
    """Prior logits (hash of each child's id, in [0, 2)) into `logits`; the value (hash of the id, in [-1, 1))."""
    stride = np.uint64(branching + 1)
    for a in range(branching):
        child = (node * stride + np.uint64(a + 1)) & np.uint64(MASK)
        logits[a] = 2.0 * _unit(child ^ np.uint64(SALT))
    return 2.0 * _unit(node) - 1.0


@jit
def synthetic_evaluation(nodes: np.ndarray, branching: int) -> tuple[np.ndarray, np.ndarray]:
    """Prior logits and values of a batch of node ids (see `evaluate_node`)."""
    logits = np.empty((len(nodes), branching))
    values = np.empty(len(nodes))
    for i in range(len(nodes)):
        values[i] = evaluate_node(nodes[i], branching, logits[i])
    return logits, values


# The same problem for `search_compiled`: a state is the row [node id, depth] (uint64), the
# environment parameters are [branching, depth] (int64).
@jit
def compiled_step(env: np.ndarray, state: np.ndarray, action: int, next_state: np.ndarray) -> tuple[float, bool, int]:
    branching = env[0]
    next_state[0] = (state[0] * np.uint64(branching + 1) + np.uint64(action + 1)) & np.uint64(MASK)
    next_state[1] = state[1] + np.uint64(1)
    return 0.0, next_state[1] >= np.uint64(env[1]), branching


@jit
def compiled_evaluate(env: np.ndarray, states: np.ndarray, logits: np.ndarray, values: np.ndarray) -> None:
    for i in range(states.shape[0]):
        values[i] = evaluate_node(states[i, 0], env[0], logits[i])


@dataclass(frozen=True)
class SyntheticProblem:
    """States are (node id, depth) tuples."""

    branching: int
    depth: int

    @property
    def root(self) -> tuple[int, int]:
        return (1, 0)

    def step(self, state: tuple[int, int], action: int) -> Transition:
        node, depth = state
        child = (node * (self.branching + 1) + action + 1) & MASK
        return Transition((child, depth + 1), 0.0, depth + 1 >= self.depth, None, self.branching)

    def evaluate(self, states: Sequence[tuple[int, int]]) -> Evaluation:
        nodes = np.fromiter((s[0] for s in states), np.uint64, len(states))
        logits, values = synthetic_evaluation(nodes, self.branching)
        return Evaluation(logits, values)

    def evaluate_one(self, state: tuple[int, int]) -> tuple[np.ndarray, float]:
        logits, values = synthetic_evaluation(np.array([state[0]], np.uint64), self.branching)
        return logits[0], float(values[0])


@dataclass(frozen=True)
class Measurement:
    sims_per_second: float
    root_visits: np.ndarray
    note: str = ""


def bench_config(problem: SyntheticProblem, simulations: int, batch_size: int = 1) -> SearchConfig:
    """evoskill's core set up to compute what the naive version and mctx compute."""
    return SearchConfig(
        num_simulations=simulations, c_puct=C_PUCT, dirichlet_weight=0.0, gamma=1.0,
        early_stop_fraction=None, normalize_q=False, unvisited_q=0.0, transpositions=False,
        max_depth=problem.depth + 1, batch_size=batch_size,
    )  # fmt: skip


def measure_evoskill(problem: SyntheticProblem, simulations: int, repeats: int, batch_size: int = 1) -> Measurement:
    """`search` with Python step/evaluate callbacks."""
    config = bench_config(problem, simulations, batch_size)
    root = Root(problem.root, problem.branching)
    result = search(root, problem.step, config, problem.evaluate)  # warm-up: JIT cache load
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        result = search(root, problem.step, config, problem.evaluate)
        best = max(best, result.stats.simulations / (time.perf_counter() - started))
    return Measurement(best, result.visit_counts)


def measure_compiled(problem: SyntheticProblem, simulations: int, repeats: int, batch_size: int = 1) -> Measurement:
    """`search_compiled` with the numba step/evaluate; the loop's compile (once per process) is excluded."""
    config = bench_config(problem, simulations, batch_size)
    root, env = np.array(problem.root, np.uint64), np.array([problem.branching, problem.depth], np.int64)
    started = time.perf_counter()
    result = search_compiled(root, problem.branching, compiled_step, compiled_evaluate, config, env)
    compile_seconds = time.perf_counter() - started
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        result = search_compiled(root, problem.branching, compiled_step, compiled_evaluate, config, env)
        best = max(best, result.stats.simulations / (time.perf_counter() - started))
    return Measurement(
        best, result.visit_counts, f"evoskill: first call (loop compile or cache load) {compile_seconds:.1f} s excluded"
    )


def measure_naive(problem: SyntheticProblem, simulations: int, repeats: int) -> Measurement:
    best = 0.0
    visits = np.zeros(problem.branching, np.int64)
    for _ in range(repeats):
        started = time.perf_counter()
        root = naive_search(problem.root, problem.step, problem.evaluate_one, simulations, C_PUCT, 1.0)
        best = max(best, simulations / (time.perf_counter() - started))
        visits = root_visits(root)
    return Measurement(best, visits)


def measure_mctx(problem: SyntheticProblem, simulations: int, repeats: int) -> Measurement | None:
    if not mctx_baseline.available():
        return None
    sps, visits, compile_seconds = mctx_baseline.run(problem.branching, problem.depth, simulations, C_PUCT, repeats)
    return Measurement(sps, visits, f"mctx: JAX compile {compile_seconds:.1f} s excluded")


def run_planner_bench(
    json_path: Path | None = None,
    simulations: int = 800,
    branching: int = 16,
    depth: int = 10,
    repeats: int = 5,
    console: Console | None = None,
) -> dict[str, float | None]:
    """Measure, print a table, write simulations/s per implementation to `json_path`.

    "evoskill" is the like-for-like figure: the compiled search (`search_compiled`, environment and
    network as numba functions, as mctx takes jitted ones), one leaf per network call, the same tree
    as the others. "evoskill_callbacks" is `search` with Python step/evaluate, one leaf per call.
    The table adds `search` with 16 leaves per call (virtual loss), the planner's batched mode.
    """
    console = console or Console()
    problem = SyntheticProblem(branching, depth)
    measured: dict[str, Measurement | None] = {
        "evoskill": measure_compiled(problem, simulations, repeats),
        "evoskill_callbacks": measure_evoskill(problem, simulations, repeats),
        "naive": measure_naive(problem, simulations, repeats),
        "mctx": measure_mctx(problem, simulations, repeats),
    }
    batched = measure_evoskill(problem, simulations, repeats, batch_size=BATCHED)
    reference, naive, mctx = measured["evoskill"], measured["naive"], measured["mctx"]
    assert reference is not None and naive is not None

    table = Table(
        title=f"planner bench: {simulations} simulations, branching {branching}, depth {depth}, best of {repeats}",
        caption=_caption(reference, mctx),
    )
    for column in ("implementation", "sims/s", "µs/sim", "vs naive", "vs mctx", "root visits"):
        table.add_column(column, justify="left" if column == "implementation" else "right")
    rows = [
        ("evoskill (compiled env + network)", reference),
        ("evoskill (Python callbacks)", measured["evoskill_callbacks"]),
        (f"evoskill (Python callbacks), batch {BATCHED}", batched),
        ("naive (node objects)", naive),
        ("mctx (JAX, batch 1)", mctx),
    ]
    for name, m in rows:
        if m is None:
            table.add_row(name, "-", "-", "-", "-", "not installed")
            continue
        l1 = int(np.abs(m.root_visits - reference.root_visits).sum())
        table.add_row(
            name,
            f"{m.sims_per_second:,.0f}",
            f"{1e6 / m.sims_per_second:.1f}",
            f"{m.sims_per_second / naive.sims_per_second:.2f}×",
            f"{m.sims_per_second / mctx.sims_per_second:.2f}×" if mctx else "-",
            "= evoskill" if l1 == 0 else f"L1 {l1}",
        )
    console.print(table)
    figures = {name: (m.sims_per_second if m else None) for name, m in measured.items()}
    if json_path is not None:
        write_report(json_path, figures, Settings())
        console.print(f"wrote {json_path}")
    return figures


def _caption(compiled: Measurement, mctx: Measurement | None) -> str:
    notes = [f"batch {BATCHED}: {BATCHED} leaves per network call under virtual loss, so a different tree"]
    notes.append(compiled.note)
    notes.append(mctx.note if mctx else "mctx: pip install '.[bench]'")
    return "; ".join(notes)


if __name__ == "__main__":
    import sys

    from evoskill.bench import bench_app

    bench_app(args=["planner", *sys.argv[1:]], prog_name="evoskill bench")
