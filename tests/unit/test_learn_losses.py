"""Loss terms on inputs small enough to check by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from evoskill.core.learn.losses import (
    advantages,
    contrastive_skill_loss,
    distillation_loss,
    entropy,
    policy_gradient_loss,
    self_imitation_loss,
    value_loss,
)
from evoskill.core.learn.networks import MASKED_LOGIT


def test_cross_entropy_to_one_hot_visits_is_minus_log_p() -> None:
    logits = torch.tensor([[1.0, 2.0, 0.5]])
    p = torch.softmax(logits, -1)
    loss = distillation_loss(logits, torch.tensor([[0.0, 1.0, 0.0]]))
    assert math.isclose(float(loss), -math.log(float(p[0, 1])), rel_tol=1e-6)


def test_padding_contributes_nothing() -> None:
    padded = torch.tensor([[1.0, 2.0, MASKED_LOGIT]])
    plain = torch.tensor([[1.0, 2.0]])
    assert torch.allclose(
        distillation_loss(padded, torch.tensor([[0.3, 0.7, 0.0]])), distillation_loss(plain, torch.tensor([[0.3, 0.7]]))
    )
    assert torch.allclose(entropy(padded), entropy(plain))


def test_importance_weights_select_examples() -> None:
    logits = torch.tensor([[0.0, 0.0], [5.0, 0.0]])
    visits = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    only_first = distillation_loss(logits, visits, torch.tensor([1.0, 0.0]))
    assert math.isclose(float(only_first), math.log(2), rel_tol=1e-6)


def test_value_loss_is_squared_near_the_target_and_linear_far_from_it() -> None:
    assert float(value_loss(torch.tensor([0.5, -1.0]), torch.tensor([1.0, -1.0]))) == 0.0625  # (0.5² / 2) / 2
    value = torch.tensor([0.0], requires_grad=True)
    value_loss(value, torch.tensor([8.0])).backward()
    assert value.grad is not None and float(value.grad) == -1.0  # bounded: 8 away pulls no harder than 1


def test_advantage_is_q_minus_detached_v() -> None:
    v = torch.tensor([0.5], requires_grad=True)
    adv = advantages(torch.tensor([[1.0, 0.0]]), v)
    assert adv.tolist() == [[0.5, -0.5]]
    assert not adv.requires_grad


def _logit_grad(advantage: float) -> torch.Tensor:
    logits = torch.zeros(1, 3, requires_grad=True)
    adv = torch.tensor([[advantage, 0.0, 0.0]])
    policy_gradient_loss(logits, adv, torch.tensor([[True, True, False]])).backward()
    assert logits.grad is not None
    return logits.grad[0]


def test_positive_advantage_pushes_the_logit_up_negative_down() -> None:
    # Gradient descent moves a logit against its gradient: negative gradient = the logit goes up.
    assert _logit_grad(+1.0)[0] < 0
    assert _logit_grad(-1.0)[0] > 0
    assert _logit_grad(0.0).abs().max() == 0


def test_actions_without_q_are_ignored_by_the_policy_gradient() -> None:
    logits = torch.zeros(1, 2)
    loss = policy_gradient_loss(logits, torch.tensor([[5.0, 1.0]]), torch.tensor([[False, True]]))
    assert math.isclose(float(loss), -0.5, rel_tol=1e-6)  # only the second action: -p * A = -0.5 * 1


def test_entropy_bonus_flattens_the_policy() -> None:
    logits = torch.tensor([[3.0, 0.0, -1.0]], requires_grad=True)
    before = float(entropy(logits.detach()))
    assert math.isclose(float(entropy(torch.zeros(1, 4))), math.log(4), rel_tol=1e-6)
    bonus_loss = -0.1 * entropy(logits)  # the learner subtracts entropy_coef * H
    bonus_loss.backward()
    with torch.no_grad():
        assert logits.grad is not None
        stepped = logits - 1.0 * logits.grad
    assert float(entropy(stepped)) > before


def test_contrastive_pulls_co_used_skills_together() -> None:
    torch.manual_seed(0)
    table = torch.nn.Parameter(torch.randn(8, 16) * 0.1)
    anchors, positives = torch.tensor([1, 2, 3, 4]), torch.tensor([2, 1, 4, 3])  # {1,2} and {3,4} co-used
    opt = torch.optim.SGD([table], lr=0.5)

    def cos(i: int, j: int) -> float:
        return float(F.cosine_similarity(table[i], table[j], dim=0).detach())

    start = cos(1, 2)
    losses = []
    for _ in range(100):
        negatives = torch.randint(1, 8, (4, 6))
        loss = contrastive_skill_loss(table, anchors, positives, negatives, temperature=0.2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
    assert cos(1, 2) > max(start, 0.8)
    assert cos(1, 2) > cos(1, 5) and cos(3, 4) > cos(3, 6)


def test_contrastive_ignores_negatives_equal_to_the_pair_and_handles_no_pairs() -> None:
    table = torch.randn(4, 8)
    pair = (torch.tensor([1]), torch.tensor([2]))
    only_clashes = contrastive_skill_loss(table, *pair, torch.tensor([[1, 2, 1]]))
    assert math.isclose(float(only_clashes), 0.0, abs_tol=1e-6)  # nothing to contrast: log(1) = 0
    empty = torch.zeros(0, dtype=torch.long)
    assert float(contrastive_skill_loss(table, empty, empty, torch.zeros(0, 3, dtype=torch.long))) == 0.0


def test_self_imitation_imitates_only_own_steps_that_beat_the_value() -> None:
    logits = torch.zeros(4, 3, requires_grad=True)
    taken = torch.tensor([1, 1, 1, -1])
    returns = torch.tensor([2.0, 0.5, 2.0, 2.0])
    value = torch.tensor([1.0, 1.0, 1.0, 1.0])
    online = torch.tensor([True, True, False, True])
    loss = self_imitation_loss(logits, taken, returns, value, online)
    # Only row 0 counts: row 1 did worse than V, row 2 is a library step, row 3 took no listed action.
    assert float(loss.detach()) == pytest.approx(math.log(3) * 1.0 / 4)
    loss.backward()
    assert logits.grad is not None
    assert float(logits.grad[0, 1]) < 0 < float(logits.grad[0, 0])  # descent raises the taken action
    assert float(logits.grad[1:].abs().sum()) == 0.0


def test_self_imitation_does_not_train_the_value_through_its_gain() -> None:
    value = torch.tensor([0.0], requires_grad=True)
    loss = self_imitation_loss(torch.zeros(1, 2), torch.tensor([0]), torch.tensor([1.0]), value, torch.tensor([True]))
    assert not loss.requires_grad or torch.autograd.grad(loss, value, allow_unused=True)[0] is None


def test_distillation_scale_weighs_each_example() -> None:
    logits, visits = torch.zeros(2, 2), torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    full = distillation_loss(logits, visits)
    assert float(distillation_loss(logits, visits, scale=torch.tensor([1.0, 0.0]))) == pytest.approx(float(full) / 2)
