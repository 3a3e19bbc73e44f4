"""DeepMind's mctx on the same synthetic problem, batch size 1, CPU (optional `bench` extra).

The problem is mirrored in JAX with the same uint32 hash as `evoskill.bench.planner`, so prior
logits and values are bit-identical. PUCT is configured to match evoskill's benchmark settings:
raw Q with 0 for unvisited children (a custom qtransform), pb_c = c_puct (pb_c_base so large that
mctx's log term vanishes), no Dirichlet noise. mctx has no transpositions and no terminal states: a
terminal edge gets discount 0, so whatever mctx expands below it adds nothing to the values above.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

SALT = 0x9E3779B9


def available() -> bool:
    try:
        import jax  # noqa: F401
        import mctx  # noqa: F401
    except ImportError:
        return False
    return True


def run(
    branching: int, depth: int, num_simulations: int, c_puct: float, repeats: int
) -> tuple[float, np.ndarray, float]:
    """Returns (best simulations per second, root visit counts, compile seconds)."""
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import mctx

    stride = jnp.uint32(branching + 1)
    actions = jnp.arange(1, branching + 1, dtype=jnp.uint32)

    def mix32(x: Any) -> Any:
        x = x ^ (x >> 16)
        x = x * jnp.uint32(0x7FEB352D)
        x = x ^ (x >> 15)
        x = x * jnp.uint32(0x846CA68B)
        return x ^ (x >> 16)

    def unit(x: Any) -> Any:
        return (mix32(x) >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)

    def logits_of(node: Any) -> Any:
        children = node[:, None] * stride + actions[None, :]
        return 2.0 * unit(children ^ jnp.uint32(SALT))

    def value_of(node: Any) -> Any:
        return 2.0 * unit(node) - 1.0

    def recurrent_fn(params: Any, rng: Any, action: Any, embedding: Any) -> Any:
        node, node_depth = embedding
        child = node * stride + action.astype(jnp.uint32) + jnp.uint32(1)
        child_depth = node_depth + 1
        done = child_depth >= depth
        output = mctx.RecurrentFnOutput(
            reward=jnp.zeros(node.shape, jnp.float32),
            discount=jnp.where(done, 0.0, 1.0).astype(jnp.float32),
            prior_logits=logits_of(child),
            value=jnp.where(done, 0.0, value_of(child)),
        )
        return output, (child, child_depth)

    def raw_q(tree: Any, node_index: Any) -> Any:
        return jnp.where(tree.children_visits[node_index] > 0, tree.qvalues(node_index), 0.0)

    root_node = jnp.array([1], jnp.uint32)
    root = mctx.RootFnOutput(
        prior_logits=logits_of(root_node),
        value=value_of(root_node),
        embedding=(root_node, jnp.zeros(1, jnp.int32)),
    )

    @jax.jit
    def policy(key: Any) -> Any:
        return mctx.muzero_policy(
            params=(), rng_key=key, root=root, recurrent_fn=recurrent_fn,
            num_simulations=num_simulations, qtransform=raw_q, dirichlet_fraction=0.0,
            pb_c_init=c_puct, pb_c_base=1e30,
        )  # fmt: skip

    key = jax.random.PRNGKey(0)
    started = time.perf_counter()
    out = jax.block_until_ready(policy(key))  # compile, excluded from timing
    compile_seconds = time.perf_counter() - started
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        out = jax.block_until_ready(policy(key))
        best = max(best, num_simulations / (time.perf_counter() - started))
    visits = np.asarray(out.search_tree.summary().visit_counts[0]).astype(np.int64)
    return best, visits, compile_seconds
