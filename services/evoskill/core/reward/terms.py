"""Scoring one step: seed 000 §3.2 dense terms, seed 004 §5.3 dimensions, failure attribution (§5.4).

`score_transition` is pure: the synchronous gRPC path (inside search) and the `step.executed` event path
both call it and must agree to the last bit. Everything it reads is in its arguments.

    total = Σ terms[name]                                   (each term already weighted, see below)
          + completion_weight · completion
          + efficiency_weight · efficiency
          + safety_weight     · safety
          + curiosity_weight  · curiosity                   (0 unless a bonus is passed in)

Terms (weight from RewardSettings × signal):
    tool_success          1 if the step ran without failure, changed something and is not a loop
    result_used           1 if it succeeded, is no loop, and names a word an earlier result revealed
                          (first seen in that feedback; not in the reset text, not echoed)
    task_completed        1 if after.done and after.won
    final_answer_correct  1 if this step won the episode (after.done, after.won, not before.won)
    error_or_loop         1 for the agent's own failure, no effect or a loop; external_scale for an
                          external failure (weight is negative, so this is a penalty)
    score_gain            after.score − before.score, or env_reward when the score did not move
Dimensions (unweighted in the breakdown):
    completion  on a terminal step: 1 if won, else clamp(score, 0, 1) − 1 (the missing share); else 0
    efficiency  −1/max_steps for every step (each step spends the budget)
    safety      −1 for an own failure or an action that lost the game; −external_scale for an
                external failure; 0 otherwise
external_scale = clamp(external_failure_scale, 0, 1), so an external failure never costs more than the
same step failing by the agent's own fault.
"""

from __future__ import annotations

from dataclasses import dataclass

from evoskill.common.v1.common_pb2 import FailureKind, Transition
from evoskill.core.reward.history import EpisodeHistory, action_arguments
from evoskill.core.state_key import normalise, state_key
from evoskill.platform.config import RewardSettings
from evoskill.reward.v1.reward_pb2 import RewardBreakdown

TERM_NAMES = (
    "tool_success",
    "result_used",
    "task_completed",
    "error_or_loop",
    "final_answer_correct",
    "score_gain",
)
OWN_FAILURES = frozenset({FailureKind.FAILURE_KIND_INVALID_ACTION, FailureKind.FAILURE_KIND_NO_EFFECT})
EXTERNAL_FAILURES = frozenset(
    {FailureKind.FAILURE_KIND_EXTERNAL_ERROR, FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT}
)
DEFAULT_MAX_STEPS = 50  # SearchConfig.max_episode_steps' default


@dataclass(frozen=True)
class StepSignals:
    """What happened in one step, before any weight is applied."""

    own_failure: bool
    external_failure: bool
    effect: bool
    loop: bool
    result_used: bool
    won_now: bool
    completed: bool
    lost_now: bool
    terminal: bool
    final_score: float
    score_gain: float
    novel: bool = False


def step_signals(transition: Transition, history: EpisodeHistory | None = None) -> StepSignals:
    history = history if history is not None else EpisodeHistory.from_transition(transition)
    before, after = transition.before, transition.after
    kind = transition.failure.kind
    own_failure = kind in OWN_FAILURES
    external_failure = kind in EXTERNAL_FAILURES
    failed = own_failure or external_failure
    # An effect is a change of state (core.state_key): the feedback text alone is none ("That is already
    # closed."), the same rule by which search drops the actions that change nothing.
    effect = not failed and state_key(after) != state_key(before)
    # A useless loop: an action already taken that brings back feedback already seen (A→B→A→B…, a
    # second "look" in the same room). A repeated action with new feedback (walking a corridor) is not one.
    loop = not external_failure and history.took(transition.action.text) and history.saw(after.text, before.text)
    # A result is used when the action names something an earlier step's feedback revealed (not just
    # echoed from that step's own action). Credited here, at the using step: a pure per-step function
    # cannot revise the producing step, and the discounted return carries it back there.
    arguments = action_arguments(transition.action.text, transition.action.template)
    result_used = not failed and not loop and bool(arguments & history.revealed)
    score_delta = after.score - before.score
    # Count-based novelty within the episode (curiosity, seed 000 §5.3): an action that changed the world
    # into a place whose description the episode has not shown before.
    # An arrival is a step whose feedback is the place's description (moving in TextWorld(Express)).
    arrived = not after.look or normalise(after.text) == normalise(after.look)
    novel = effect and not loop and arrived and not history.saw(after.text, before.text)
    return StepSignals(
        own_failure=own_failure,
        external_failure=external_failure,
        effect=effect,
        loop=loop,
        result_used=result_used,
        won_now=after.done and after.won and not before.won,
        completed=after.done and after.won,
        lost_now=after.lost and not before.lost,
        terminal=after.done,
        final_score=after.score,
        # Adapters normalise Observation.score; env_reward is the fallback for those reporting only a reward.
        score_gain=score_delta if score_delta != 0.0 else transition.env_reward,
        novel=novel,
    )


def external_scale(weights: RewardSettings) -> float:
    return min(max(weights.external_failure_scale, 0.0), 1.0)


def weighted_terms(signals: StepSignals, weights: RewardSettings) -> dict[str, float]:
    if signals.external_failure:
        fault = external_scale(weights)
    else:
        fault = 1.0 if signals.own_failure or not signals.effect or signals.loop else 0.0
    return {
        "tool_success": weights.tool_success * float(signals.effect and not signals.loop),
        "result_used": weights.result_used * float(signals.result_used),
        "task_completed": weights.task_completed * float(signals.completed),
        "error_or_loop": weights.error_or_loop * fault,
        "final_answer_correct": weights.final_answer_correct * float(signals.won_now),
        "score_gain": weights.score_gain * signals.score_gain,
    }


def completion(signals: StepSignals) -> float:
    if not signals.terminal:
        return 0.0
    return 1.0 if signals.completed else min(max(signals.final_score, 0.0), 1.0) - 1.0


def efficiency(max_steps: int) -> float:
    return -1.0 / max(max_steps, 1)


def safety(signals: StepSignals, weights: RewardSettings) -> float:
    if signals.own_failure or signals.lost_now:
        return -1.0
    if signals.external_failure:
        return -external_scale(weights)
    return 0.0


def outcome_reward(won: bool, lost: bool, final_score: float, weights: RewardSettings) -> float:
    """What the last step of an episode earns for how it ended, beyond its score gain: the terms that need no
    history (task completed, final answer, completion, safety). Search values the end of a rollout by it."""
    signals = StepSignals(own_failure=False, external_failure=False, effect=True, loop=False, result_used=False,
                          won_now=won, completed=won, lost_now=lost, terminal=True, final_score=final_score,
                          score_gain=0.0)
    terms = weighted_terms(signals, weights)
    return (terms["task_completed"] + terms["final_answer_correct"] + weights.completion_weight * completion(signals)
            + weights.safety_weight * safety(signals, weights))


def total_of(breakdown: RewardBreakdown, weights: RewardSettings) -> float:
    """The documented formula, in a fixed order so every caller gets the same bits."""
    total = 0.0
    for name in TERM_NAMES:
        total += breakdown.terms[name]
    total += weights.completion_weight * breakdown.completion
    total += weights.efficiency_weight * breakdown.efficiency
    total += weights.safety_weight * breakdown.safety
    total += weights.curiosity_weight * breakdown.curiosity
    return total


def score_transition(
    transition: Transition,
    weights: RewardSettings,
    history: EpisodeHistory | None = None,
    *,
    curiosity: float | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> RewardBreakdown:
    """Score one step (see the module docstring for the formula).

    `history` defaults to the digest the transition carries (`Transition.history`);
    `curiosity` is an intrinsic bonus computed elsewhere (curiosity.py); when None, the episode's own
    count-based novelty (1 for a step into a place not seen before) is used; weighted by curiosity_weight."""
    signals = step_signals(transition, history)
    breakdown = RewardBreakdown(
        terms=weighted_terms(signals, weights),
        completion=completion(signals),
        efficiency=efficiency(max_steps),
        safety=safety(signals, weights),
        curiosity=(1.0 if signals.novel else 0.0) if curiosity is None else curiosity,
        external_failure=signals.external_failure,
    )
    breakdown.total = total_of(breakdown, weights)
    return breakdown


def with_curiosity(breakdown: RewardBreakdown, bonus: float, weights: RewardSettings) -> RewardBreakdown:
    """A copy of `breakdown` whose curiosity is `bonus` and whose total is recomputed by the same formula,
    so it equals `score_transition(..., curiosity=bonus)` bit for bit."""
    combined = RewardBreakdown()
    combined.CopyFrom(breakdown)
    combined.curiosity = bonus
    combined.total = total_of(combined, weights)
    return combined
