"""Properties of score_transition over random transitions: determinism, the formula, failure attribution."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.common.v1.common_pb2 import Action, Failure, FailureKind, Observation, Transition
from evoskill.core.reward import TERM_NAMES, EpisodeLog, score_transition, with_curiosity
from evoskill.platform.config import RewardSettings

TEXTS = st.sampled_from(["You see a key.", "A door.", "Nothing happens.", "You take the key.", ""])
ACTIONS = st.sampled_from(["take key", "open door", "go north", "look", "unlock door with key"])
KINDS = st.sampled_from(
    [
        FailureKind.FAILURE_KIND_UNSPECIFIED,
        FailureKind.FAILURE_KIND_NONE,
        FailureKind.FAILURE_KIND_INVALID_ACTION,
        FailureKind.FAILURE_KIND_NO_EFFECT,
        FailureKind.FAILURE_KIND_EXTERNAL_ERROR,
        FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT,
    ]
)
SCORES = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def observations(draw: st.DrawFn) -> Observation:
    return Observation(
        text=draw(TEXTS),
        score=draw(SCORES),
        done=draw(st.booleans()),
        won=draw(st.booleans()),
        lost=draw(st.booleans()),
        moves=draw(st.integers(0, 100)),
        valid_actions=draw(st.lists(ACTIONS, max_size=3)),
    )


@st.composite
def transitions(draw: st.DrawFn) -> Transition:
    n = draw(st.integers(0, 4))
    return Transition(
        episode_id="e",
        step_index=n,
        before=draw(observations()),
        action=Action(text=draw(ACTIONS)),
        after=draw(observations()),
        env_reward=draw(st.floats(-1.0, 1.0, allow_nan=False)),
        failure=Failure(kind=draw(KINDS)),
        history=EpisodeLog.start(draw(TEXTS)).extended(draw(st.lists(st.tuples(ACTIONS, TEXTS), min_size=n,
                                                                      max_size=n))).digest(),
    )


# Penalty weights stay penalties (≤ 0) and dimension weights stay rewards (≥ 0); any scale is allowed.
WEIGHTS = st.builds(
    RewardSettings,
    tool_success=st.floats(0, 1),
    result_used=st.floats(0, 1),
    task_completed=st.floats(0, 3),
    error_or_loop=st.floats(-1, 0),
    final_answer_correct=st.floats(0, 3),
    score_gain=st.floats(0, 2),
    external_failure_scale=st.floats(-1, 3),
    completion_weight=st.floats(0, 2),
    efficiency_weight=st.floats(0, 1),
    safety_weight=st.floats(0, 2),
    curiosity_weight=st.floats(0, 1),
)
FAST = settings(max_examples=150, deadline=None, database=None)  # no .hypothesis folder in the tree


@FAST
@given(transitions(), WEIGHTS)
def test_scoring_is_deterministic(transition: Transition, weights: RewardSettings) -> None:
    first = score_transition(transition, weights)
    again = score_transition(Transition.FromString(transition.SerializeToString()), weights)
    assert first == again


@FAST
@given(transitions(), WEIGHTS, st.floats(0, 1))
def test_total_is_the_documented_formula(
    transition: Transition, weights: RewardSettings, bonus: float
) -> None:
    b = score_transition(transition, weights, curiosity=bonus)
    assert set(b.terms) == set(TERM_NAMES)
    expected = (
        sum(b.terms[name] for name in TERM_NAMES)
        + weights.completion_weight * b.completion
        + weights.efficiency_weight * b.efficiency
        + weights.safety_weight * b.safety
        + weights.curiosity_weight * b.curiosity
    )
    assert abs(b.total - expected) <= 1e-9 * max(1.0, abs(expected))
    assert with_curiosity(score_transition(transition, weights), bonus, weights) == b


@FAST
@given(
    transitions(),
    WEIGHTS,
    st.sampled_from([FailureKind.FAILURE_KIND_EXTERNAL_ERROR, FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT]),
    st.sampled_from([FailureKind.FAILURE_KIND_INVALID_ACTION, FailureKind.FAILURE_KIND_NO_EFFECT]),
)
def test_external_failure_never_costs_more_than_the_same_own_failure(
    transition: Transition,
    weights: RewardSettings,
    external: FailureKind,
    own: FailureKind,
) -> None:
    transition.failure.kind = external
    external_total = score_transition(transition, weights).total
    transition.failure.kind = own
    own_total = score_transition(transition, weights).total
    assert external_total >= own_total - 1e-12
