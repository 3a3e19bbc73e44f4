"""An episode as episode.completed carries it: each step once, so its size grows linearly with its steps;
also the long synthetic episodes the integration tests publish."""

from __future__ import annotations

import pytest

from evoskill.common.v1.common_pb2 import Action, Observation, Transition
from evoskill.core.episode_record import record_step, steps_with_states
from evoskill.core.reward import EpisodeLog
from evoskill.events.v1.events_pb2 import EpisodeCompleted, SearchTarget, StepExecuted

GOAL = "Your task is to boil water. First, focus on the substance. Then, take actions that will cause it to boil."


def room(i: int, width: int) -> Observation:
    """A ScienceWorld-like state: a long room description and `width` valid actions."""
    look = f"This room is called the kitchen {i}. In it, you see: " + ", ".join(f"a jar {j}" for j in range(40))
    actions = [f"move jar {j} to cupboard {i % 7}" for j in range(width)]
    return Observation(text=f"You move to the kitchen {i}.", goal=GOAL, look=look, inventory="a thermometer",
                       valid_actions=actions, score=i / 1000, moves=i)


def played(steps: int, width: int, episode_id: str = "long") -> tuple[EpisodeCompleted, list[Transition]]:
    """`steps` searched steps as the sandbox (history digests) and the planner (record_step) produce them."""
    episode = EpisodeCompleted(episode_id=episode_id, env_spec="sciworld:boil", fold="train", agent="mcts")
    log = EpisodeLog.start(room(0, width).text)
    transitions = []
    before = room(0, width)
    for i in range(steps):
        after = room(i + 1, width)
        action = before.valid_actions[i % width]
        transition = Transition(episode_id=episode_id, step_index=i, env_spec=episode.env_spec, before=before,
                                action=Action(text=action, template="move X to Y"), after=after,
                                env_reward=0.001, history=log.digest())
        log.record(action, after.text)
        n = len(before.valid_actions)
        target = SearchTarget(actions=before.valid_actions, templates=["move X to Y"] * n, visit_probs=[1 / n] * n,
                              q_values=[0.1] * n, priors=[1 / n] * n, seen=[False] * n, root_value=0.2)
        record_step(episode, transition, target, reward=0.01)
        transitions.append(transition)
        before = after
    episode.score, episode.env_steps = before.score, steps
    return episode, transitions


@pytest.mark.parametrize("width", [5, 400])
def test_an_episodes_message_grows_linearly_with_its_steps(width: int) -> None:
    n = 150  # past HISTORY_LIMIT, so a quadratic term would show
    single, _ = played(n, width)
    double, transitions = played(2 * n, width)
    assert 1.95 < double.ByteSize() / single.ByteSize() < 2.05
    # Each step's own event is bounded too: the last step's is no bigger than an early one's plus the digest.
    sizes = [StepExecuted(transition=t).ByteSize() for t in transitions]
    assert max(sizes) < sizes[1] + 8 * 1024


def test_each_state_and_its_valid_actions_appear_once() -> None:
    episode, transitions = played(4, width=6)
    assert not episode.initial.valid_actions and not any(s.observation.valid_actions for s in episode.steps)
    assert all(s.observation.text == t.after.text for s, t in zip(episode.steps, transitions, strict=True))
    for (before, step), transition in zip(steps_with_states(episode), transitions, strict=True):
        assert (before.text, before.look, before.goal) == (transition.before.text, transition.before.look, GOAL)
        assert list(step.target.actions) == list(transition.before.valid_actions)
        assert (step.index, step.action, step.reward) == (transition.step_index, transition.action, 0.01)


def test_a_step_without_search_still_lists_its_candidates() -> None:
    episode = EpisodeCompleted(episode_id="demo")
    before = room(0, 3)
    record_step(episode, Transition(before=before, action=Action(text=before.valid_actions[1]), after=room(1, 3)),
                SearchTarget(), reward=0.0)
    assert list(episode.steps[0].target.actions) == list(before.valid_actions)
    assert not episode.steps[0].target.visit_probs
