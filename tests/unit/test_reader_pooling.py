"""The reader pools by sums over groups, not membership matrices: each candidate's packed tokens by segment sums, the
serving kernel's running sums and the training kernel's scatter-add alike (the same sums and token counts as the
[B, A, N] matrix they replaced, whose cost grew with candidates × tokens), and the clauses a candidate names by one
sum per clause (the same means as the [B, A·K, L] matrix), padding adding nothing; the training kernel's best match,
found without a graph, gives the serving kernel's max and its gradient."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.core.learn.reader import _argmax_match, _clause_means, _max_match, _running_sum, _scattered_sum


def membership_sums(values: torch.Tensor, slot: torch.Tensor, real: torch.Tensor, candidates: int) -> torch.Tensor:
    slots = torch.arange(candidates)
    member = ((slot.unsqueeze(1) == slots[None, :, None]) & real.unsqueeze(1)).to(values.dtype)  # [B, A, N]
    return member @ values


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=7), min_size=1, max_size=3),
       width=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_segment_sums_equal_the_membership_matrix(lengths: list[list[int]], width: int, seed: int) -> None:
    """States with candidates of 0-6 tokens each, packed in slot order and padded to the longest state."""
    generator = torch.Generator().manual_seed(seed)
    candidates = max(len(row) for row in lengths)
    tokens = max(1, max(sum(row) for row in lengths))
    slot = torch.zeros(len(lengths), tokens, dtype=torch.long)
    real = torch.zeros(len(lengths), tokens, dtype=torch.bool)
    for b, row in enumerate(lengths):
        packed = [a for a, n in enumerate(row) for _ in range(n)]
        slot[b, :len(packed)] = torch.tensor(packed, dtype=torch.long)
        real[b, :len(packed)] = True
    values = torch.randn(len(lengths), tokens, width, generator=generator)
    like = torch.zeros(len(lengths), candidates, dtype=torch.long)
    for kernel in (_running_sum, _scattered_sum):  # serving's and training's
        sums, counts = kernel(values, slot, real, like)
        torch.testing.assert_close(sums, membership_sums(values, slot, real, candidates))
        torch.testing.assert_close(counts, membership_sums(torch.ones_like(values[..., :1]), slot, real, candidates))


@settings(max_examples=40, deadline=None)
@given(clauses=st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=6), min_size=1, max_size=3),
       padding=st.integers(0, 3), named=st.lists(st.integers(0, 9), min_size=6, max_size=6),
       width=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_clause_means_equal_the_membership_matrix(clauses: list[list[int]], padding: int, named: list[int],
                                                  width: int, seed: int) -> None:
    """States of 1-6 clauses of 1-4 tokens (numbered from 1, padded with 0); each of 3 candidates names 2 clause
    numbers, some beyond the state's last clause or 0 (none): those read a zero vector."""
    generator = torch.Generator().manual_seed(seed)
    length = max(sum(row) for row in clauses) + padding
    clause = torch.zeros(len(clauses), length, dtype=torch.long)
    for b, row in enumerate(clauses):
        numbers = [c for c, n in enumerate(row, start=1) for _ in range(n)]
        clause[b, :len(numbers)] = torch.tensor(numbers)
    x = torch.randn(len(clauses), length, width, generator=generator) * (clause > 0).unsqueeze(-1)
    lines = torch.tensor(named).reshape(1, 3, 2).expand(len(clauses), -1, -1).clamp(max=length)
    member = ((clause[:, None, None, :] == lines.unsqueeze(-1)) & (lines > 0).unsqueeze(-1)).to(x.dtype)
    expected = (member @ x.unsqueeze(1)) / member.sum(-1, keepdim=True).clamp(min=1.0)
    torch.testing.assert_close(_clause_means(x, clause, lines), expected)


@settings(max_examples=30, deadline=None)
@given(tokens=st.integers(1, 6), keys=st.integers(1, 7), width=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_best_match_gives_the_max_and_its_gradient(tokens: int, keys: int, width: int, seed: int) -> None:
    """Training's best match (each query row's best allowed key found without a graph, recomputed as one product)
    equals serving's (the max over all its similarities), in value and in gradient; a row with no key allowed reads
    -1e4 and passes no gradient."""
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(2, tokens, width, generator=generator, requires_grad=True)
    key = torch.randn(2, keys, width, generator=generator, requires_grad=True)
    allowed = torch.rand(2, tokens, keys, generator=generator) < 0.6
    allowed[0, 0] = False  # a row with none
    weights = torch.randn(2, tokens, generator=generator)
    found = []
    for match in (_argmax_match, _max_match):
        value = match(query, key, allowed)
        (value * weights).sum().backward()
        found.append((value.detach(), query.grad.clone(), key.grad.clone()))  # type: ignore[union-attr]
        query.grad, key.grad = None, None
    for ours, theirs in zip(*found, strict=True):
        torch.testing.assert_close(ours, theirs)
    assert found[0][0][0, 0] == -1e4 and not found[0][1][0, 0].any()
