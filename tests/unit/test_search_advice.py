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


def test_each_real_visit_to_where_a_root_candidate_leads_costs_its_logit() -> None:
    from types import SimpleNamespace

    from evoskill.core.search.advice import revisits
    from evoskill.core.search.types import Evaluation

    actions = {(): ["move west", "move east", "take coin"], ("move west",): []}
    nodes = {(): SimpleNamespace(state_key="kitchen"), ("move west",): SimpleNamespace(state_key="hall"),
             ("move east",): SimpleNamespace(state_key="yard")}
    model = SimpleNamespace(nodes=nodes, actions=lambda path: actions[path])
    visits = {"hall": 3, "yard": 1}.get
    evaluation = revisits(lambda key: visits(key, 0), 0.5)(model, [()], Evaluation([np.ones(3)], np.zeros(1)))
    # "take coin" was never stepped (no node): it costs nothing...
    assert evaluation.logits is not None and evaluation.logits[0].tolist() == [-0.5, 0.5, 1.0]
    # ... unless the episode took it in this state before: each time is a visit where it leads, at least.
    tried = {("kitchen", "take coin"): 2, ("hall", "move east"): 5}
    evaluation = revisits(lambda key: visits(key, 0), 0.5, lambda state, action: tried.get((state, action), 0))(
        model, [()], Evaluation([np.ones(3)], np.zeros(1)))
    assert evaluation.logits is not None and evaluation.logits[0].tolist() == [-0.5, 0.5, 0.0]
