"""One search-settings type: the settings file, the planner's request, the kernels and the model share it."""

from __future__ import annotations

import pytest

from evoskill.core.errors import InvalidInput
from evoskill.core.search_config import NOT_ON_THE_WIRE, SearchConfig
from evoskill.planner.search_io import resolve_config
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import Settings

CHANGED = SearchConfig(
    num_simulations=300, c_puct=2.0, dirichlet_alpha=0.5, dirichlet_weight=0.0, rollout_depth=3, gamma=0.9,
    value_mix=0.25, early_stop_fraction=None, max_children=5, widening_k=1.5, widening_alpha=0.7, hierarchical=True,
    transpositions=False, batch_size=2, virtual_loss=0.5, unvisited_q=-0.25, normalize_q=False, max_depth=12, seed=9,
    prefetch_children=0, noop_penalty=2.0, revisit_penalty=0.0, memory_weight=1.5, memory_limit=3,
    policy_value_mix=0.75, algorithm="gumbel", gumbel_max_actions=4, gumbel_c_visit=10.0, gumbel_c_scale=0.5,
    gumbel_scale=0.0, policy_revisit_penalty=0.0, memory_profile="exploratory", entropy_trigger=0.3, prune_losses=False,
    time_budget_s=4.0, explore_epsilon=0.1, novelty_weight=0.5, curiosity_weight=0.2,
    memory_similar_share=0.7, stall_trigger=5,
)


def test_every_setting_differs_in_the_example() -> None:
    default = SearchConfig()
    same = [name for name in SearchConfig.model_fields if getattr(CHANGED, name) == getattr(default, name)]
    assert same == list(NOT_ON_THE_WIRE)


def test_the_proto_carries_every_setting_both_ways() -> None:
    assert SearchConfig.from_proto(CHANGED.to_proto(), SearchConfig()) == CHANGED
    assert SearchConfig.from_proto(SearchConfig().to_proto(), CHANGED).model_copy(
        update={name: getattr(CHANGED, name) for name in NOT_ON_THE_WIRE}) == SearchConfig()


def test_unset_fields_take_the_services_settings() -> None:
    request = planner_pb2.SearchConfig(num_simulations=8, agent="mcts", policy_version="v1")
    resolved = SearchConfig.from_proto(request, CHANGED)
    assert resolved == CHANGED.model_copy(update={"num_simulations": 8})
    assert SearchConfig.from_proto(planner_pb2.SearchConfig(unvisited_parent=True), CHANGED).unvisited_q == "parent"


def test_zero_and_a_whole_budget_mean_off_as_the_proto_documents() -> None:
    request = planner_pb2.SearchConfig(max_children=0, widening_k=0.0, early_stop_fraction=1.0)
    off = SearchConfig.from_proto(request, CHANGED)
    assert off.max_children is None and off.widening_k is None and off.early_stop_fraction is None


def test_a_bad_request_is_bad_input_naming_the_field() -> None:
    with pytest.raises(InvalidInput, match="num_simulations: Input should be greater than or equal to 1"):
        SearchConfig.from_proto(planner_pb2.SearchConfig(num_simulations=0), SearchConfig())
    with pytest.raises(InvalidInput, match="value_mix"):
        SearchConfig.from_proto(planner_pb2.SearchConfig(value_mix=1.5), SearchConfig())


def test_the_product_defaults_are_the_types_and_a_step_gets_its_own_seed() -> None:
    settings = Settings()
    assert settings.search == SearchConfig()
    assert (settings.search.value_mix, settings.search.batch_size, settings.search.revisit_penalty) == (1.0, 8, 0.5)
    resolved = resolve_config(planner_pb2.SearchConfig(seed=1), settings.search, seed=1003)
    assert resolved == settings.search.model_copy(update={"seed": 1003})


def test_settings_files_and_environment_still_set_search(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_SEARCH__MAX_CHILDREN", "0")
    monkeypatch.setenv("EVOSKILL_SEARCH__UNVISITED_Q", "0.5")
    monkeypatch.setenv("EVOSKILL_SEARCH__EARLY_STOP_FRACTION", "1")
    search = Settings().search
    assert search.max_children is None and search.unvisited_q == 0.5 and search.early_stop_fraction is None


@pytest.mark.parametrize(
    ("agent", "request_mix", "expected"),
    [("mcts", None, 1.0), ("policy+mcts", None, 0.5), ("policy+mcts", 0.25, 0.25)],
)
def test_value_head_weighs_in_where_theta_advises(agent: str, request_mix: float | None, expected: float) -> None:
    request = planner_pb2.SearchConfig(agent=agent)
    if request_mix is not None:
        request.value_mix = request_mix
    assert resolve_config(request, SearchConfig(), seed=3).value_mix == expected
