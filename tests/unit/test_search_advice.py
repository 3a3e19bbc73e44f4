"""Advice on the priors: a logit bonus on θ's logits or on uniform priors (the memories' bonus itself:
test_memory_fusion.py)."""

from __future__ import annotations

import numpy as np

from evoskill.core.search.advice import with_logit_bonus


def test_the_bonus_adds_to_logits_or_replaces_uniform_priors() -> None:
    bonus = np.array([0.5, 0.0, -0.5])
    assert with_logit_bonus(None, bonus).tolist() == [0.5, 0.0, -0.5]
    wide = np.array([1.0, 1.0, 1.0, 9.0], dtype=np.float32)  # policy rows may be wider than the action count
    assert with_logit_bonus(wide, bonus).tolist() == [1.5, 1.0, 0.5, 9.0]
    assert wide.tolist() == [1.0, 1.0, 1.0, 9.0]
