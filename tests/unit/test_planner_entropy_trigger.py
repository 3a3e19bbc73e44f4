"""policy+mcts searches only where θ is unsure (`search.entropy_trigger`, seed 004 §4.1), over a real
CoinCollector game with the sandbox host in-process."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evoskill.core.reward import Scorer
from evoskill.core.search.trigger import needs_search, normalised_entropy
from evoskill.core.search_config import SearchConfig
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import RewardSettings
from tests.unit.test_planner_theta_alone import Batch, HostSandbox

PolicyFn = Callable[[Batch], tuple[list[np.ndarray], np.ndarray]]


def test_normalised_entropy_spans_zero_to_one() -> None:
    assert normalised_entropy([0.0, 0.0, 0.0, 0.0]) == pytest.approx(1.0)
    assert normalised_entropy([50.0, 0.0, 0.0]) == pytest.approx(0.0, abs=1e-9)
    assert normalised_entropy([3.0]) == 0.0
    assert needs_search([50.0, 0.0], 0.0)  # trigger 0: every step is searched


@given(st.lists(st.floats(-30, 30), min_size=2, max_size=40), st.floats(-5, 5))
def test_entropy_is_bounded_and_shift_free(logits: list[float], shift: float) -> None:
    h = normalised_entropy(logits)
    assert -1e-9 <= h <= 1 + 1e-9
    assert normalised_entropy([x + shift for x in logits]) == pytest.approx(h, abs=1e-9)


def sure(batch: Batch) -> tuple[list[np.ndarray], np.ndarray]:
    """A θ that is sure of one candidate in every state (the first one that is not a look or inventory)."""
    rows = []
    for _, _, actions, _ in batch:
        row = np.zeros(len(actions))
        row[0] = 20.0
        rows.append(row)
    return rows, np.zeros(len(batch))


def unsure(batch: Batch) -> tuple[list[np.ndarray], np.ndarray]:
    return [np.zeros(len(actions)) for _, _, actions, _ in batch], np.zeros(len(batch))


def play(policy: PolicyFn, trigger: float, stall: int = 0, steps: int = 4) -> list[planner_pb2.EpisodeUpdate]:
    player = EpisodePlayer(HostSandbox(), SimpleNamespace(Score=lambda r: SimpleNamespace(total=0.0)),
                           SearchConfig(), Scorer(RewardSettings()), policy)
    config = planner_pb2.SearchConfig(agent="policy+mcts", num_simulations=8, entropy_trigger=trigger,
                                      rollout_depth=2, stall_trigger=stall)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=steps,
                                             config=config)
    return [u for u in player.play(request) if u.action]


def simulations(updates: Sequence[planner_pb2.EpisodeUpdate]) -> list[int]:
    return [u.search.stats.simulations for u in updates]


def test_a_sure_theta_acts_without_search_and_spends_only_the_children() -> None:
    searched, trusted = play(sure, 0.0), play(sure, 0.5)
    assert all(n > 0 for n in simulations(searched))
    assert simulations(trusted) == [0] * len(trusted)
    assert [u.action for u in trusted] == [u.search.root[int(np.argmax([a.prior for a in u.search.root]))].action
                                           for u in trusted]  # θ's argmax, as θ alone would act
    assert trusted[-1].env_steps < searched[-1].env_steps


def test_a_sure_theta_is_searched_once_the_score_has_stalled_for_stall_trigger_steps() -> None:
    """CoinCollector's score rises only at the coin, which a θ sure of the first candidate does not reach in six
    steps: steps 0-2 trust it, from the third step without the score rising every step is searched."""
    updates = play(sure, 0.5, stall=3, steps=6)
    assert len(updates) == 6 and all(u.observation.score == 0 for u in updates)
    assert [n > 0 for n in simulations(updates)] == [False] * 3 + [True] * 3
    assert [u.exploration for u in updates] == [""] * 3 + ["stalled"] * 3


def test_an_unsure_theta_is_searched() -> None:
    assert all(n > 0 for n in simulations(play(unsure, 0.5)))


def test_each_update_says_how_much_of_the_episode_the_planner_took() -> None:
    updates = play(unsure, 0.5)
    last = updates[-1]
    assert 0 < last.planner_seconds <= last.seconds  # searching is the planner's; waiting on the env is not
    assert [u.seconds for u in updates] == sorted(u.seconds for u in updates)
