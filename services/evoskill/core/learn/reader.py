"""The reading encoder of θ (`NetConfig.encoder = "reader"`): each candidate's tokens attend to the
state's tokens, so "slice red potato" is scored by what the notes, the room and the inventory say
about those words.

Shapes (B states, L state tokens, N candidate tokens (all of a state's candidates, packed), A candidates,
W width, K skill dim, H hidden):

    forward(ctx_ids[B, L], ctx_seg[B, L], ctx_clause[B, L], cand_ids[B, N], cand_slot[B, N], cand_match[B, N, F],
            cand_lines[B, A, K], template_ids[B, A], mask[B, A]) -> (logits[B, A], value[B])

1. Tokens: a token table (MiniLM's embeddings by PCA, or random; frozen by default, so a word the
   training fold never showed is represented like the ones it did) projected to W, plus the state
   token's segment (goal, notes, observation, inventory) or the candidate token's exact-match features
   (`tokens.MATCH_FEATURES`).
2. Local context: residual width-3 convolutions inside each clause of the state (a recipe line, a
   sentence of the room) and inside each candidate ("roasted red apple" is not "red apple").
3. Reading: `layers` blocks of multi-head cross-attention from every candidate token to all the state's
   tokens, each followed by a feed-forward layer (post-norm residuals). With 0 layers the exact-match
   features, the named clauses and MaxSim (4.) do all the reading, at a fraction of the cost.
4. Scoring: the mean and a gated mean of a candidate's tokens, the clauses it names (the notes lines
   and the room sentence that share its rarest words, read whole: "roast the red potato" for "cook red
   potato in oven", `tokens.StateTokens.lines_named`), with its skill embedding, next to a state summary
   (attention-pooled and mean state tokens) -> an MLP logit, plus the skill prior (state query · skill),
   as in `networks.PolicyValueNet`, plus a late-interaction score (ColBERT's MaxSim): each candidate
   token's best learned match among the tokens of the clauses it names, summed over the candidate with a
   learned gate per token. That term ties "oven" to "roast the red potato": with the pooled vectors alone,
   θ trained on 100 CookingWorld demonstrations picked the recipe's appliance in 60% of the training
   steps that cook, 83% with it. The value head reads the state summary.

B, L, N and A are dynamic axes of the exported graph. Packing the candidates' tokens (rather than
padding each candidate to the longest) keeps the attention to the tokens there are.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from evoskill.core.learn.networks import MASKED_LOGIT, UNK, NetConfig
from evoskill.core.learn.tokens import MATCH_FEATURES, NOTE_LINES, NUM_SEGMENTS, PAD, TokenInputs


def _local(mix: nn.Module, norm: nn.Module, x: torch.Tensor, group: torch.Tensor, gap: int = 1) -> torch.Tensor:
    """A width-3 convolution (taps `gap` apart) that stays inside groups: x [B, N, W], group [B, N] (0 =
    padding; a token only sees tokens of its own group). norm(x + gelu(mix([prev, x, next]))), 0 on padding."""
    keep = (group > 0).to(x.dtype).unsqueeze(-1)
    joined = ((group[:, gap:] == group[:, :-gap]) & (group[:, gap:] > 0)).to(x.dtype).unsqueeze(-1)  # [B, N-gap, 1]
    edge = x[:, :gap] * 0.0
    prev = torch.cat([edge, x[:, :-gap] * joined], dim=1)
    after = torch.cat([x[:, gap:] * joined, edge], dim=1)
    return norm(x + F.gelu(mix(torch.cat([prev, x, after], dim=-1)))) * keep


def _running_sum(values: torch.Tensor, slot: torch.Tensor, real: torch.Tensor,
                 like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, A, D] sums of the rows of values [B, N, D] by candidate, and [B, A, 1] each candidate's token count: token
    n belongs to candidate slot[b, n] (padding, real False, to none); like [B, A] gives A. The tokens are packed in
    candidate order, padding last (`tokens.make_inputs`), so a candidate's sum is the difference of a running sum at
    the two ends of its run (in float64: a float32 sum over 15,000 tokens would lose digits). Linear in N: the
    [B, A, N] membership matrix this replaced cost A × N, which with ScienceWorld's 1,600 candidates of ~10 tokens
    was most of θ's time. The serving kernel: onnxruntime runs it faster than `_scattered_sum`."""
    ones = real.to(values.dtype).unsqueeze(-1)  # [B, N, 1]
    counts = torch.zeros_like(like, dtype=values.dtype).unsqueeze(-1).scatter_add(
        1, torch.where(real, slot, 0).unsqueeze(-1), ones)  # [B, A, 1]: each candidate's tokens
    ends = counts.cumsum(1).to(torch.long)  # [B, A, 1]: one past its last token
    starts = ends - counts.to(torch.long)
    running = F.pad((values * ones).to(torch.float64).cumsum(1), (0, 0, 1, 0))  # [B, N + 1, D]: 0 before the first
    width = values.shape[-1]
    sums = running.gather(1, ends.expand(-1, -1, width)) - running.gather(1, starts.expand(-1, -1, width))
    return sums.to(values.dtype), counts


def _scattered_sum(values: torch.Tensor, slot: torch.Tensor, real: torch.Tensor,
                   like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`_running_sum`'s sums and counts by one scatter-add, whose backward is one gather: the training kernel (the
    running sums' float64 cumsum, its flipped backward and the zero-filled gradients of two gathers were 60 ms of a
    280 ms cloning step on ScienceWorld; onnxruntime's scatter-add is the slower one forward)."""
    ones = real.to(values.dtype).unsqueeze(-1)  # [B, N, 1]
    index = torch.where(real, slot, 0).unsqueeze(-1)  # padding adds its zeros to candidate 0
    empty = torch.zeros_like(like, dtype=values.dtype).unsqueeze(-1)  # [B, A, 1]
    width = values.shape[-1]
    sums = empty.expand(-1, -1, width).contiguous().scatter_add(1, index.expand(-1, -1, width), values * ones)
    return sums, empty.scatter_add(1, index, ones)


def _clause_means(x: torch.Tensor, clause: torch.Tensor, named: torch.Tensor) -> torch.Tensor:
    """[B, A, K, W] the mean state token of each clause that named [B, A, K] numbers (0 = none: a zero vector);
    x [B, L, W] the state's tokens, clause [B, L] theirs (numbered from 1, so at most L; 0 on padding). Sums by
    clause once, then a gather: the [B, A·K, L] membership matmul it replaced cost A·K·L·W."""
    b, a, k = named.shape
    width = x.shape[-1]
    rows = torch.zeros_like(F.pad(x, (0, 0, 1, 0)))  # [B, L + 1, W]: clause c in row c
    sums = rows.scatter_add(1, clause.unsqueeze(-1).expand(-1, -1, width), x)
    counts = rows[..., :1].scatter_add(1, clause.unsqueeze(-1), torch.ones_like(x[..., :1]))
    index = named.reshape(b, a * k, 1)
    means = sums.gather(1, index.expand(-1, -1, width)) / counts.gather(1, index).clamp(min=1.0)
    return (means * (index > 0).to(x.dtype)).reshape(b, a, k, width)


def _max_match(query: torch.Tensor, key: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """[B, N] each query row's largest dot product with the key rows [B, L, W] it is allowed ([B, N, L]; -1e4 where
    none is): the max over all its similarities. The serving kernel."""
    return torch.where(allowed, query @ key.transpose(1, 2), -1e4).max(-1).values


def _argmax_match(query: torch.Tensor, key: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """`_max_match`, for training: the [B, N, L] similarities, a step's largest tensors, only pick each row's best key,
    without a graph, and the gradient flows through that one product, as the max's would (the max's backward and the
    bmm's were a third of a ScienceWorld cloning step). Ties pick the first key, as the max does."""
    with torch.no_grad():
        best = torch.where(allowed, query @ key.transpose(1, 2), -1e4).argmax(-1, keepdim=True)  # [B, N, 1]
    picked = key.gather(1, best.expand(-1, -1, key.shape[-1]))  # [B, N, W]
    return torch.where(allowed.gather(2, best).squeeze(-1), (query * picked).sum(-1), -1e4)


class _CrossBlock(nn.Module):
    """Queries [B, N, W] attend to keys [B, L, W] (masked), then a feed-forward layer."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        self.heads = heads
        self.query = nn.Linear(width, width)
        self.key_value = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, width)
        self.ffn = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)

    def forward(self, y: torch.Tensor, x: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        b, n, w = y.shape
        h = self.heads
        q = self.query(y).reshape(b, n, h, w // h).transpose(1, 2) / math.sqrt(w // h)  # [B, h, N, W/h]
        k, v = self.key_value(x).reshape(b, -1, 2, h, w // h).permute(2, 0, 3, 1, 4)  # each [B, h, L, W/h]
        bias = torch.where(keys, 0.0, MASKED_LOGIT).to(q.dtype)[:, None, None, :]  # masked keys get no weight
        read = ((q @ k.transpose(-1, -2) + bias).softmax(-1) @ v).transpose(1, 2).reshape(b, n, w)
        y = self.norm1(y + self.out(read))
        return self.norm2(y + self.ffn(y))


class ReaderNet(nn.Module):
    INPUTS = TokenInputs._fields
    # The kernels over a step's largest tensors, (candidate sums, best match): training's have the cheaper backward,
    # serving's (the exported graph) run faster on onnxruntime; equal outputs (tests/unit/test_reader_pooling.py).
    # `bench cloning-step` trains with the serving ones beside.
    train_kernels = (_scattered_sum, _argmax_match)
    serve_kernels = (_running_sum, _max_match)
    DYNAMIC_AXES: ClassVar[dict[str, dict[int, str]]] = {
        "ctx_ids": {0: "batch", 1: "tokens"},
        "ctx_seg": {0: "batch", 1: "tokens"},
        "ctx_clause": {0: "batch", 1: "tokens"},
        "cand_ids": {0: "batch", 1: "candidate_tokens"},
        "cand_slot": {0: "batch", 1: "candidate_tokens"},
        "cand_match": {0: "batch", 1: "candidate_tokens"},
        "cand_lines": {0: "batch", 1: "candidates"},
        "template_ids": {0: "batch", 1: "candidates"},
        "mask": {0: "batch", 1: "candidates"},
    }

    def __init__(self, config: NetConfig) -> None:
        super().__init__()
        if config.vocab_size < 2:
            raise ValueError("the reader needs the token vocabulary's size (NetConfig.vocab_size)")
        self.config = config
        w, h, k = config.width, config.hidden, config.skill_dim
        self.tokens = nn.Embedding(config.vocab_size, config.feature_dim, padding_idx=PAD)
        self.tokens.weight.requires_grad_(config.train_tokens)
        self.token_proj = nn.Linear(config.feature_dim, w)
        self.segments = nn.Embedding(NUM_SEGMENTS, w)
        self.match_proj = nn.Linear(len(MATCH_FEATURES), w)
        # Two convolutions over each clause of the state, taps 1 and 2 apart: a token sees three on each side
        # ("red" in "roast the red potato" sees "roast"), never across a clause ("fry the carrot" below).
        self.state_mix = nn.ModuleList([nn.Linear(3 * w, w), nn.Linear(3 * w, w)])
        self.state_norm = nn.ModuleList([nn.LayerNorm(w), nn.LayerNorm(w)])
        self.cand_mix, self.cand_norm = nn.Linear(3 * w, w), nn.LayerNorm(w)
        self.cross = nn.ModuleList([_CrossBlock(w, config.heads) for _ in range(config.layers)])
        self.gate = nn.Linear(w, 1)  # which tokens of a candidate its second pooled vector weighs
        self.pool_query = nn.Parameter(torch.randn(w) / math.sqrt(w))
        self.state_encoder = nn.Sequential(nn.Linear(2 * w, h), nn.ReLU())
        self.skills = nn.Embedding(config.max_skills, k, padding_idx=UNK)
        nn.init.normal_(self.skills.weight, std=0.1)
        with torch.no_grad():
            self.skills.weight[UNK].zero_()
        # Late interaction with the clauses a candidate names (ColBERT's MaxSim): each candidate token's best
        # learned match among their tokens, summed over the candidate ("oven" finds "roast the ...").
        self.match_query, self.match_key = nn.Linear(w, w), nn.Linear(w, w)
        # Linear([candidate, its lines, skill, state]) as a sum of projections: the state broadcasts over A.
        self.pair_action = nn.Linear(4 * w + k, h)
        self.pair_state = nn.Linear(h, h, bias=False)
        self.pair_out = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))
        self.skill_query = nn.Linear(h, k)
        self.value_head = nn.Sequential(nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 1))

    def set_token_table(self, table: np.ndarray) -> None:
        if table.shape != tuple(self.tokens.weight.shape):
            raise ValueError(f"token table of shape {table.shape}, expected {tuple(self.tokens.weight.shape)}")
        with torch.no_grad():
            self.tokens.weight.copy_(torch.from_numpy(table))
            self.tokens.weight[PAD].zero_()

    def forward(
        self,
        ctx_ids: torch.Tensor,
        ctx_seg: torch.Tensor,
        ctx_clause: torch.Tensor,
        cand_ids: torch.Tensor,
        cand_slot: torch.Tensor,
        cand_match: torch.Tensor,
        cand_lines: torch.Tensor,
        template_ids: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys = ctx_seg > 0  # [B, L]
        x = self.token_proj(self.tokens(ctx_ids)) + self.segments(ctx_seg)
        for gap, (mix, norm) in enumerate(zip(self.state_mix, self.state_norm, strict=True), start=1):
            x = _local(mix, norm, x, ctx_clause, gap)  # [B, L, W]

        real = cand_ids != PAD  # [B, N]
        y = self.token_proj(self.tokens(cand_ids)) + self.match_proj(cand_match)
        y = _local(self.cand_mix, self.cand_norm, y, torch.where(real, cand_slot + 1, 0))
        for block in self.cross:
            y = block(y, x, keys)
        # The clauses each candidate names, read whole: the mean token of each.
        lines = _clause_means(x, ctx_clause, cand_lines)  # [B, A, K, W]
        used = (cand_lines[..., :-1] > 0).to(x.dtype).unsqueeze(-1)
        note_lines = (lines[:, :, :-1] * used).sum(2) / used.sum(2).clamp(min=1.0)
        room_line = lines[:, :, -1]

        weight = (x @ self.pool_query).masked_fill(~keys, MASKED_LOGIT).softmax(-1).unsqueeze(-1)  # [B, L, 1]
        pooled = (weight * x).sum(1)
        average = x.sum(1) / keys.to(x.dtype).sum(1, keepdim=True).clamp(min=1.0)
        s = self.state_encoder(torch.cat([pooled, average], dim=-1))  # [B, H]

        # MaxSim: each candidate token's best similarity among the tokens of its candidate's clauses.
        named = (ctx_clause[:, None, None, :] == cand_lines.unsqueeze(-1)) & (cand_lines > 0).unsqueeze(-1)
        in_lines = named.to(x.dtype).amax(2)  # [B, A, L]: 1 where the context token is in a clause it names
        # [B, N, L]: each candidate token gets its candidate's row whole (copied rows, 15x faster than a gather)
        b, a, length = in_lines.shape
        rows = (cand_slot + torch.arange(b).unsqueeze(1) * a).flatten()  # [B·N] rows of in_lines' [B·A, L]
        allowed = (in_lines > 0).flatten(0, 1).index_select(0, rows).reshape(b, -1, length)
        any_line = torch.gather(in_lines.amax(-1), 1, cand_slot)  # [B, N]: 0 where the candidate names no clause
        query, key = self.match_query(y) / math.sqrt(x.shape[-1]), self.match_key(x)  # [B, N, W], [B, L, W]
        segment_sum, best_match = self.train_kernels if self.training else self.serve_kernels
        best = best_match(query, key, allowed) * any_line  # [B, N]

        # Pool each candidate's tokens, one segment sum for all: its mean, gated mean and MaxSim.
        gate = torch.sigmoid(self.gate(y))  # [B, N, 1]
        w = y.shape[-1]
        per_token = torch.cat([y, y * gate, best.unsqueeze(-1) * gate], dim=-1)
        sums, count = segment_sum(per_token, cand_slot, real, template_ids)  # [B, A, 2W + 1], [B, A, 1]
        count = count.clamp(min=1.0)
        mean, gated, maxsim = sums[..., :w] / count, sums[..., w:2 * w] / count, sums[..., -1]

        skill = self.skills(template_ids)  # [B, A, K skill dim]
        pair = self.pair_action(torch.cat([mean, gated, note_lines, room_line, skill], dim=-1))
        pair = torch.relu(pair + self.pair_state(s).unsqueeze(1))
        skill_prior = (self.skill_query(s).unsqueeze(1) * skill).sum(-1)
        logits = (self.pair_out(pair).squeeze(-1) + skill_prior + maxsim).masked_fill(~mask, MASKED_LOGIT)
        return logits, self.value_head(s).squeeze(-1)

    def example_inputs(self, b: int = 2, a: int = 3) -> tuple[torch.Tensor, ...]:
        """Inputs of the given shape, to trace the graph for export."""
        n, length = 2 * a, 5
        ctx = torch.ones(b, length, dtype=torch.long)
        return (ctx, ctx, ctx, torch.ones(b, n, dtype=torch.long), (torch.arange(n) // 2).repeat(b, 1),
                torch.zeros(b, n, len(MATCH_FEATURES)), torch.ones(b, a, NOTE_LINES + 1, dtype=torch.long),
                torch.zeros(b, a, dtype=torch.long), torch.ones(b, a, dtype=torch.bool))
