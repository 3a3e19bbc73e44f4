"""Safe exploration's decision rules: canary split, shadow verdict, promotion and rollback."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.core.errors import FailedPrecondition, InvalidInput, NotFound
from evoskill.core.limits import MESSAGE_CHARS
from evoskill.learner.registry import PolicyRegistry
from evoskill.orchestrator.exploration.activities import choose_baseline
from evoskill.orchestrator.exploration.logic import (
    ArmFigures,
    ExplorationParams,
    ShadowEpisode,
    ShadowStep,
    Thresholds,
    canary_arms,
    canary_decision,
    compare,
    shadow_figures,
    shadow_verdict,
    validate,
    watch_decision,
)
from evoskill.orchestrator.training.logic import sample_tasks
from tests.unit.test_training_logic import COUNTS, SECONDS, SEEDS, SPECS, usable_seconds


def arm(wins: int, episodes: int, rewards: list[float] | None = None) -> ArmFigures:
    return ArmFigures(episodes, wins, rewards if rewards is not None else [1.0 if i < wins else 0.0
                                                                           for i in range(episodes)])


def test_canary_split_is_deterministic_and_keeps_both_arms() -> None:
    first = canary_arms(seed=7, count=20, fraction=0.25)
    assert first == canary_arms(seed=7, count=20, fraction=0.25)  # a replayed workflow draws the same
    assert sum(first) == 5
    assert any(canary_arms(seed=s, count=20, fraction=0.25) != first for s in range(8, 12))  # the seed places them
    assert sum(canary_arms(seed=0, count=4, fraction=0.01)) == 1   # never an empty candidate arm...
    assert sum(canary_arms(seed=0, count=4, fraction=0.99)) == 3   # ...nor an empty baseline arm
    with pytest.raises(ValueError, match=">= 2"):
        canary_arms(seed=0, count=1, fraction=0.5)


def test_better_or_equal_candidate_is_promoted() -> None:
    t = Thresholds(success_margin=0.1, reward_margin=0.5, alpha=0.1)
    assert canary_decision(arm(10, 20), arm(12, 20), t).passed
    assert canary_decision(arm(10, 20), arm(10, 20), t).passed
    # Slightly worse, within the margins: still promoted.
    same = [1.0, 0.0] * 10
    assert canary_decision(arm(10, 20, same), arm(9, 20, [r - 0.2 for r in same]), t).passed


def test_clear_regression_is_rolled_back_with_the_figures_in_the_reason() -> None:
    t = Thresholds(success_margin=0.1, reward_margin=0.5, alpha=0.1)
    decision = canary_decision(arm(18, 20), arm(4, 20), t)
    assert not decision.passed
    assert "regressed on success" in decision.reason and "candidate success 20%" in decision.reason
    # Reward alone can regress too, with success equal.
    rewards_b, rewards_c = [5.0, 5.2, 4.8, 5.1] * 5, [1.0, 1.2, 0.8, 1.1] * 5
    decision = canary_decision(arm(10, 20, rewards_b), arm(10, 20, rewards_c), t)
    assert not decision.passed and "mean_reward" in decision.reason and "success (" not in decision.reason


def test_alpha_trades_evidence_for_caution() -> None:
    """A shortfall beyond the margin on few episodes: significant only when alpha asks little evidence."""
    base, cand = arm(2, 2, [1.0, 1.0]), arm(1, 2, [1.0, 0.0])
    strict = Thresholds(success_margin=0.1, reward_margin=0.1, alpha=0.5)   # point estimates decide
    lenient = Thresholds(success_margin=0.1, reward_margin=0.1, alpha=0.05)
    assert not canary_decision(base, cand, strict).passed
    assert canary_decision(base, cand, lenient).passed
    success, reward = compare(base, cand, 0.1, 0.1, 0.05)
    assert reward.shortfall == pytest.approx(0.5) and not reward.regressed
    assert success.shortfall == pytest.approx(0.5) and 0.05 < success.p_value < 0.5
    # No spread at all (always won vs never won): the point estimate is decisive at any alpha.
    assert not canary_decision(arm(3, 3, [1.0] * 3), arm(0, 3, [1.0] * 3), lenient).passed


def test_watch_uses_its_own_margins_against_the_baseline_canary_figures() -> None:
    base, promoted = arm(5, 10), arm(4, 10)
    t = Thresholds(success_margin=0.5, reward_margin=5.0, alpha=0.5)
    assert watch_decision(base, promoted, t).passed                      # the canary margins
    tight = Thresholds(success_margin=0.5, reward_margin=5.0, alpha=0.5, watch_success_margin=0.0)
    decision = watch_decision(base, promoted, tight)
    assert not decision.passed and decision.reason.startswith("watch:")
    with pytest.raises(ValueError, match="at least one episode"):
        watch_decision(base, ArmFigures(), t)


def shadow(won: bool, pairs: list[tuple[str, str]], valid: bool = True, value: float = 0.5) -> ShadowEpisode:
    return ShadowEpisode("e", "twx:coin", 0, won, 1.0, [ShadowStep(b, c, valid, value, 0.4) for b, c in pairs])


def test_shadow_refuses_disagreement_where_the_baseline_won_only() -> None:
    t = Thresholds(min_agreement=0.5)
    agree_on_win = shadow(True, [("a", "a"), ("b", "b")])
    disagree_on_loss = shadow(False, [("a", "x"), ("b", "y"), ("c", "z")])
    figures = shadow_figures([agree_on_win, disagree_on_loss])
    assert figures.steps == 5 and figures.agreement == pytest.approx(0.4) and figures.agreement_on_wins == 1.0
    assert figures.mean_candidate_value == pytest.approx(0.5) and figures.mean_baseline_value == pytest.approx(0.4)
    assert shadow_verdict(figures, t).passed  # disagreeing where the baseline failed is fine: it may be better
    assert "the baseline won no episode" in shadow_verdict(shadow_figures([disagree_on_loss]), t).reason
    refused = shadow_verdict(shadow_figures([shadow(True, [("a", "x"), ("b", "b"), ("c", "y")])]), t)
    assert not refused.passed and "33%" in refused.reason


def test_shadow_refuses_invalid_or_non_finite_choices() -> None:
    t = Thresholds(min_agreement=0.0, max_invalid=0)
    assert not shadow_verdict(shadow_figures([shadow(True, [("a", "zzz")], valid=False)]), t).passed
    nan = shadow_figures([shadow(False, [("a", "a")], value=math.nan)])
    assert nan.invalid == 1 and not shadow_verdict(nan, t).passed
    assert shadow_verdict(nan, Thresholds(max_invalid=1)).passed


def test_validate_names_bad_fields() -> None:
    problems = validate(ExplorationParams(candidate="", envs=[], canary_episodes=1, canary_fraction=1.0,
                                          thresholds=Thresholds(alpha=0.0, reward_margin=math.inf)))
    text = "; ".join(problems)
    for field in ("candidate", "envs", "canary_episodes", "canary_fraction", "alpha", "reward_margin"):
        assert field in text
    assert validate(ExplorationParams(candidate="v000002", envs=["twx:coin"])) == []


def test_a_bad_timeout_seed_or_version_is_refused_bounded() -> None:
    problems = validate(ExplorationParams(candidate="v" * 10**6, envs=["twx:coin"], seed=-1,
                                          heartbeat_timeout_s=math.nan, episode_timeout_s=-5))
    text = "; ".join(problems)
    for name in ("candidate is 1000000 characters", "seed", "heartbeat_timeout_s", "episode_timeout_s"):
        assert name in text
    assert len(text) < 1000


@settings(max_examples=300, deadline=None)
@given(st.builds(ExplorationParams, candidate=st.sampled_from(["v000002", "", "v" * 300]), envs=SPECS,
                 shadow_episodes=COUNTS, canary_episodes=COUNTS, canary_fraction=st.floats(0, 1),
                 watch_episodes=COUNTS, simulations=COUNTS, max_steps=COUNTS, seed=SEEDS,
                 fold_size=st.one_of(COUNTS, st.just(10**12)), parallelism=COUNTS,
                 thresholds=st.builds(Thresholds, min_agreement=st.floats(0, 1), max_invalid=COUNTS,
                                      alpha=st.floats(0, 0.5), success_margin=st.floats(), reward_margin=st.floats(),
                                      watch_reward_margin=st.one_of(st.none(), st.floats())),
                 heartbeat_timeout_s=SECONDS, episode_timeout_s=SECONDS))
def test_any_exploration_input_is_refused_naming_its_field_or_runs(params: ExplorationParams) -> None:
    """As for training: what passes `validate` never raises in the workflow."""
    problems = validate(params)
    if problems:
        assert all(len(p) < MESSAGE_CHARS for p in problems)
        return
    usable_seconds(params.heartbeat_timeout_s, params.episode_timeout_s)
    assert 0 < sum(canary_arms(params.seed, params.canary_episodes, params.canary_fraction)) < params.canary_episodes
    assert len(sample_tasks(params.envs, params.seed, 1, params.shadow_episodes, params.fold_size)) == \
        params.shadow_episodes
    decision = canary_decision(arm(1, 2), arm(1, 2), params.thresholds)
    assert decision.reason


def test_baseline_is_the_serving_version_else_the_newest_older_one() -> None:
    published = ["v000001", "v000002", "v000003"]
    assert choose_baseline("v000003", "", "v000001", published) == "v000001"
    assert choose_baseline("v000003", "", "", published) == "v000002"
    assert choose_baseline("v000003", "1", "v000002", published) == "v000001"
    with pytest.raises(FailedPrecondition, match="already the baseline"):
        choose_baseline("v000002", "", "v000002", published)
    with pytest.raises(FailedPrecondition, match="no baseline"):
        choose_baseline("v000001", "", "", published)
    with pytest.raises(NotFound, match="not published"):
        choose_baseline("v000009", "", "", published)
    with pytest.raises(InvalidInput, match="not of the form"):
        choose_baseline("v000003", "three", "", published)


def test_registry_keeps_the_serving_pointer_durably_apart_from_latest(tmp_path: Path) -> None:
    registry = PolicyRegistry(tmp_path)
    for number in (1, 2):
        (tmp_path / f"p{number}.onnx").write_bytes(b"x")
        registry.add(number, tmp_path / f"p{number}.onnx", {})
    assert registry.serving() is None and registry.serving_entry().version == "v000002"  # none promoted: latest
    previous, now = registry.set_serving("1", "canary passed")
    assert previous is None and now.version == "v000001" and now.reason == "canary passed"
    (tmp_path / "p3.onnx").write_bytes(b"x")
    registry.add(3, tmp_path / "p3.onnx", {})  # a new version is published, not promoted
    reopened = PolicyRegistry(tmp_path)
    assert reopened.latest() is not None and reopened.latest().version == "v000003"  # type: ignore[union-attr]
    assert reopened.serving_entry().version == "v000001"
    previous, now = reopened.set_serving("v000003", "promoted")
    assert previous is not None and previous.version == "v000001" and now.version == "v000003"
    with pytest.raises(NotFound, match="not published"):
        reopened.set_serving("v000009", "x")
    with pytest.raises(InvalidInput, match="reason is empty"):
        reopened.set_serving("v000001", " ")
