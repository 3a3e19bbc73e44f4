"""Without the JIT (numba absent or NUMBA_DISABLE_JIT=1) the same kernels run as plain Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from evoskill.core.search import HAVE_NUMBA

SCRIPT = """
import json
import numpy as np
from evoskill.core.search import Evaluation, Root, SearchConfig, Transition, search
from evoskill.core.search.descend import collect_leaves

def step(state, action):
    nxt = (*state, action)
    return Transition(nxt, float(nxt == (1, 2, 0)), len(nxt) == 3, nxt, 3, [a % 2 for a in range(3)])

def evaluate(states):
    return Evaluation([np.array([0.1 * len(s), 0.0, -0.2]) for s in states], [0.1 * len(s) for s in states])

def run():
    config = SearchConfig(num_simulations=60, batch_size=3, widening_k=2.0, hierarchical=True, seed=4)
    result = search(Root((), 3, key=(), templates=[0, 1, 0]), step, config, evaluate)
    return {
        "visits": result.visit_counts.tolist(),
        "q": [round(float(q), 12) for q in result.q_values],
        "pv": result.principal_variation(),
        "nodes": result.stats.nodes,
        "compiled": hasattr(collect_leaves, "py_func"),
    }

if __name__ == "__main__":
    print(json.dumps(run()))
"""


def test_pure_python_kernels_give_the_same_search() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(SCRIPT, "fallback_script", "exec"), namespace)
    compiled = namespace["run"]()
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    interpreted = json.loads(out.stdout)
    assert interpreted.pop("compiled") is False
    assert compiled.pop("compiled") is HAVE_NUMBA
    assert interpreted == compiled
