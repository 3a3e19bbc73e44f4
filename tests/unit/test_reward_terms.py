"""Each dense term, dimension and the failure attribution of score_transition on hand-built steps."""

from __future__ import annotations

import pytest

from evoskill.common.v1.common_pb2 import Action, Failure, FailureKind, Observation, Transition
from evoskill.core.reward import EpisodeHistory, EpisodeLog, score_transition, step_signals, total_of
from evoskill.core.reward.history import HISTORY_LIMIT, REVEALED_LIMIT
from evoskill.platform.config import RewardSettings

W = RewardSettings.model_validate({})
KITCHEN = "You are in the kitchen. There is a closed fridge."


def step(
    action: str = "open fridge",
    before: str = KITCHEN,
    after: str = "You open the fridge, revealing a carrot.",
    *,
    failure: FailureKind = FailureKind.FAILURE_KIND_NONE,
    initial: str = "",
    previous: tuple[tuple[str, str], ...] = (),
    score: tuple[float, float] = (0.0, 0.0),
    done: bool = False,
    won: bool = False,
    lost: bool = False,
    env_reward: float = 0.0,
    template: str = "",
) -> Transition:
    """One step after the reset text `initial` and the `previous` (action, feedback) steps, with the
    history digest the sandbox would send."""
    return Transition(
        episode_id="e1",
        step_index=len(previous),
        # The room description tracks the feedback here, so different feedback = a changed world.
        before=Observation(text=before, look=before, goal="Cook the carrot.", score=score[0]),
        action=Action(text=action, template=template),
        after=Observation(text=after, look=after, score=score[1], done=done, won=won, lost=lost),
        env_reward=env_reward,
        failure=Failure(kind=failure),
        history=EpisodeLog.start(initial).extended(previous).digest(),
    )


def test_successful_action_earns_tool_success_only() -> None:
    breakdown = score_transition(step(), W)
    assert breakdown.terms["tool_success"] == pytest.approx(W.tool_success)
    assert breakdown.terms["error_or_loop"] == 0.0
    assert breakdown.terms["result_used"] == 0.0
    assert breakdown.safety == 0.0
    assert breakdown.completion == 0.0
    assert breakdown.efficiency == pytest.approx(-1 / 50)
    assert not breakdown.external_failure
    assert breakdown.total == total_of(breakdown, W)


def test_invalid_action_is_an_own_error_and_unsafe() -> None:
    breakdown = score_transition(
        step("eat fridge", after=KITCHEN, failure=FailureKind.FAILURE_KIND_INVALID_ACTION), W
    )
    assert breakdown.terms["tool_success"] == 0.0
    assert breakdown.terms["error_or_loop"] == pytest.approx(W.error_or_loop)
    assert breakdown.safety == -1.0
    assert not breakdown.external_failure


def test_step_without_effect_counts_as_error_even_unflagged() -> None:
    breakdown = score_transition(step("wait", after=KITCHEN), W)
    assert breakdown.terms["tool_success"] == 0.0
    assert breakdown.terms["error_or_loop"] == pytest.approx(W.error_or_loop)
    assert breakdown.safety == 0.0  # doing nothing is wasteful, not unsafe


@pytest.mark.parametrize(
    "external", [FailureKind.FAILURE_KIND_EXTERNAL_ERROR, FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT]
)
@pytest.mark.parametrize("own", [FailureKind.FAILURE_KIND_INVALID_ACTION, FailureKind.FAILURE_KIND_NO_EFFECT])
def test_external_failure_is_penalised_less_than_the_same_own_failure(
    external: FailureKind, own: FailureKind
) -> None:
    external_breakdown = score_transition(step(after="error: tool crashed", failure=external), W)
    own_breakdown = score_transition(step(after="error: tool crashed", failure=own), W)
    assert external_breakdown.external_failure and not own_breakdown.external_failure
    assert external_breakdown.terms["error_or_loop"] == pytest.approx(
        W.error_or_loop * W.external_failure_scale
    )
    assert external_breakdown.safety == pytest.approx(-W.external_failure_scale)
    assert external_breakdown.total > own_breakdown.total


def test_external_failure_scale_is_clamped_so_it_never_costs_more() -> None:
    harsh = RewardSettings.model_validate({"external_failure_scale": 3.0})
    external = score_transition(step(failure=FailureKind.FAILURE_KIND_EXTERNAL_ERROR), harsh)
    own = score_transition(step(failure=FailureKind.FAILURE_KIND_INVALID_ACTION), harsh)
    assert external.total >= own.total


def test_repeated_action_bringing_back_seen_feedback_is_a_loop() -> None:
    hall, kitchen = "You are in the hall.", KITCHEN
    transition = step(
        "go east",
        before=hall,
        after=kitchen,
        initial=hall,
        previous=(("go east", kitchen), ("go west", hall)),
    )
    signals = step_signals(transition)
    assert signals.loop and signals.effect
    breakdown = score_transition(transition, W)
    assert breakdown.terms["tool_success"] == 0.0
    assert breakdown.terms["error_or_loop"] == pytest.approx(W.error_or_loop)


def test_repeated_action_with_new_feedback_is_not_a_loop() -> None:
    transition = step(
        "go east",
        before="You are in the hall.",
        after="You are in the garden.",
        previous=(("go east", "You are in the hall."),),
    )
    assert not step_signals(transition).loop
    assert score_transition(transition, W).terms["tool_success"] == pytest.approx(W.tool_success)


def test_action_naming_what_an_earlier_result_revealed_uses_that_result() -> None:
    revealed = "You open the fridge, revealing a carrot."
    transition = step(
        "take carrot from fridge",
        before=revealed,
        after="You take the carrot.",
        previous=(("open fridge", revealed),),
        template="take X from Y",
    )
    assert score_transition(transition, W).terms["result_used"] == pytest.approx(W.result_used)


def test_echo_of_the_agents_own_words_is_not_a_used_result() -> None:
    # "fridge" came back in the feedback, but only because the agent itself said it.
    transition = step(
        "close fridge",
        before="You open the fridge.",
        after="You close the fridge.",
        previous=(("open fridge", "You open the fridge."),),
    )
    assert score_transition(transition, W).terms["result_used"] == 0.0


def test_what_was_visible_from_the_start_is_not_a_used_result() -> None:
    transition = step(
        "open fridge",
        before="You see nothing new.",
        after="You open the fridge.",
        initial=KITCHEN,
        previous=(("look", "You are in the kitchen. There is a fridge."),),
    )
    assert score_transition(transition, W).terms["result_used"] == 0.0


def test_explicit_history_overrides_the_transition() -> None:
    transition = step("take carrot", after="You take the carrot.")
    history = EpisodeHistory.from_transition(step(previous=(("open fridge", "You see a carrot."),)))
    assert score_transition(transition, W).terms["result_used"] == 0.0
    assert score_transition(transition, W, history).terms["result_used"] == pytest.approx(W.result_used)


def test_winning_step_completes_the_task_with_the_correct_final_answer() -> None:
    transition = step(
        "eat meal",
        after="You eat the meal. You won!",
        score=(0.8, 1.0),
        done=True,
        won=True,
    )
    breakdown = score_transition(transition, W)
    assert breakdown.terms["task_completed"] == pytest.approx(W.task_completed)
    assert breakdown.terms["final_answer_correct"] == pytest.approx(W.final_answer_correct)
    assert breakdown.terms["score_gain"] == pytest.approx(0.2 * W.score_gain)
    assert breakdown.completion == 1.0


def test_losing_step_is_incomplete_and_unsafe() -> None:
    transition = step(
        "eat raw chicken",
        after="You got food poisoning. You lost!",
        score=(0.4, 0.4),
        done=True,
        lost=True,
    )
    breakdown = score_transition(transition, W)
    assert breakdown.terms["task_completed"] == 0.0
    assert breakdown.terms["final_answer_correct"] == 0.0
    assert breakdown.completion == pytest.approx(-0.6)
    assert breakdown.safety == -1.0


def test_score_gain_prefers_the_normalised_score_and_falls_back_to_env_reward() -> None:
    moved = score_transition(step(score=(0.25, 0.5), env_reward=10.0), W)
    assert moved.terms["score_gain"] == pytest.approx(0.25 * W.score_gain)
    reward_only = score_transition(step(env_reward=0.3), W)
    assert reward_only.terms["score_gain"] == pytest.approx(0.3 * W.score_gain)


def test_efficiency_follows_the_step_budget() -> None:
    assert score_transition(step(), W, max_steps=10).efficiency == pytest.approx(-0.1)


def test_same_transition_gives_the_identical_breakdown() -> None:
    transition = step("take carrot", previous=(("open fridge", "A carrot."),))
    first, second = (
        score_transition(transition, W),
        score_transition(Transition.FromString(transition.SerializeToString()), W),
    )
    assert first.SerializeToString(deterministic=True) == second.SerializeToString(deterministic=True)


def test_history_digest_is_bounded_and_keeps_the_most_recent_steps() -> None:
    def log(n: int) -> EpisodeLog:
        return EpisodeLog.start(KITCHEN).extended((f"go {i}", f"You reach room {i}, a new word{i}.")
                                                  for i in range(n))

    long, longer = log(4 * HISTORY_LIMIT).digest(), log(8 * HISTORY_LIMIT).digest()
    assert len(long.actions) == len(long.feedbacks) == HISTORY_LIMIT and len(long.revealed_words) == REVEALED_LIMIT
    assert len(longer.actions) == HISTORY_LIMIT and len(longer.revealed_words) == REVEALED_LIMIT
    assert longer.ByteSize() < 8 * 1024  # a transition's size does not grow with the episode
    seen = EpisodeHistory.from_transition(Transition(history=long))
    last = 4 * HISTORY_LIMIT - 1
    assert seen.took(f"Go {last} ") and seen.saw(f"you reach room {last}, a new word{last}.", before_text="")
    assert f"word{last}" in seen.revealed
    assert not seen.took("go 0") and not seen.saw(KITCHEN, before_text="")  # older than the digest keeps
    assert log(3).digest() == log(3).digest()  # the same episode, the same bytes

