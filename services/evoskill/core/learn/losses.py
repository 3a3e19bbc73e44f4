"""The loss terms of the outer loop, each a pure function of tensors (seed 000 §3.1, §3.3, §5.2, §5.3).

Per-example terms take `weights` [B] (importance weights of prioritised replay) and return the
weighted mean over the batch. Logits are masked (padding at MASKED_LOGIT), so a softmax over a row
covers only real candidates and padding contributes exactly zero to every sum below.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _weighted_mean(per_example: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    if weights is None:
        return per_example.mean()
    return (per_example * weights).sum() / weights.sum().clamp(min=1e-8)


def distillation_loss(
    logits: torch.Tensor,
    visit_probs: torch.Tensor,
    weights: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """AlphaZero policy distillation: cross entropy H(π_search, p_θ) = -Σ_a π(a) log p_θ(a); `scale` [B]
    multiplies each example's term (the learner weighs searched steps apart from cloned ones)."""
    log_p = torch.log_softmax(logits, dim=-1)
    per_example = -(visit_probs * log_p).sum(-1)
    return _weighted_mean(per_example if scale is None else per_example * scale, weights)


def value_loss(value: torch.Tensor, returns: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Regression of V_θ(s) to the discounted return: Huber (squared error within 1 of the target, linear
    beyond). Returns of shaped rewards reach ±10 (a won game is worth about 8), and a squared error that
    large would fill the clipped gradient norm on its own and starve the policy terms early in training."""
    return _weighted_mean(F.smooth_l1_loss(value, returns, reduction="none", beta=1.0), weights)


def advantages(q_values: torch.Tensor, baseline: torch.Tensor) -> torch.Tensor:
    """A(s, a) = Q(s, a) - V(s), with V detached: the baseline must not be trained through the actor."""
    return q_values - baseline.detach().unsqueeze(-1)


def policy_gradient_loss(
    logits: torch.Tensor,
    advantage: torch.Tensor,
    q_mask: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """All-actions policy gradient over the actions the search evaluated: -Σ_a p_θ(a) A(s, a).

    Its gradient is Σ_a p_θ(a) A(s, a) ∇log p_θ(a), the expectation of seed 000 §3.3's
    ∇log π(a|s) A(s, a) under the current policy, computed exactly from the search's Q instead of
    sampled from the one action taken. It needs no importance ratio, so replayed and offline steps
    (off-policy data, seed 004 §3) are used as they are. Actions without a Q estimate count as A = 0.
    """
    p = torch.softmax(logits, dim=-1)
    adv = torch.where(q_mask, advantage.detach(), torch.zeros_like(advantage))
    return _weighted_mean(-(p * adv).sum(-1), weights)


def self_imitation_loss(
    logits: torch.Tensor,
    taken: torch.Tensor,
    returns: torch.Tensor,
    value: torch.Tensor,
    online: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Self-imitation (Oh et al., 2018): -log p_θ(a_taken) · max(G - V_θ(s), 0) on the agent's own steps.

    The agent's past actions whose return beat what θ expected there (the steps of the games it won, mostly)
    are imitated, the others ignored: a won online game is learnt from as a demonstration would be, however
    spread the search's targets were. `taken` [B] is the executed action's column (-1: not among the
    candidates), `online` [B] marks the agent's own steps (library steps are imitated by distillation already).
    """
    log_p = torch.log_softmax(logits, dim=-1)
    picked = log_p.gather(-1, taken.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    gain = (returns - value.detach()).clamp(min=0.0)
    per_example = torch.where(online & (taken >= 0), -picked * gain, torch.zeros_like(picked))
    return _weighted_mean(per_example, weights)


def entropy(logits: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean policy entropy; the learner subtracts entropy_coef * entropy (a bonus, seed 000 §5.3)."""
    log_p = torch.log_softmax(logits, dim=-1)
    return _weighted_mean(-(log_p.exp() * log_p).sum(-1), weights)


def contrastive_skill_loss(
    skills: torch.Tensor,
    anchors: torch.Tensor,
    positives: torch.Tensor,
    negatives: torch.Tensor,
    temperature: float = 0.1,
) -> torch.Tensor:
    """InfoNCE on skill embeddings (seed 000 §3.1): templates used together in a successful episode
    are positives, randomly drawn templates are negatives; similarity is cosine / temperature.

    skills [S, K] the embedding table; anchors, positives [P] rows; negatives [P, M] rows. A drawn
    negative equal to its anchor or positive is ignored (it would push a pair against itself).
    """
    if anchors.numel() == 0:
        return skills.sum() * 0.0  # no pairs this batch: zero, still attached to the graph
    a = F.normalize(skills[anchors], dim=-1)
    pos = (a * F.normalize(skills[positives], dim=-1)).sum(-1, keepdim=True)  # [P, 1]
    neg = torch.einsum("pk,pmk->pm", a, F.normalize(skills[negatives], dim=-1))  # [P, M]
    clash = (negatives == anchors.unsqueeze(-1)) | (negatives == positives.unsqueeze(-1))
    neg = neg.masked_fill(clash, float("-inf"))
    logits = torch.cat([pos, neg], dim=-1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(anchors), dtype=torch.long, device=logits.device))
