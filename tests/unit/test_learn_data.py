"""Episodes -> training examples -> network inputs; also the synthetic episodes other learn tests use."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from evoskill.common.v1.common_pb2 import Action, Observation, Transition
from evoskill.core.episode_record import record_step
from evoskill.core.learn import HashingFeaturizer, SkillVocab, episode_examples, make_inputs, state_text
from evoskill.core.state_text import candidate_text, notes_along, with_recent
from evoskill.events.v1.events_pb2 import EpisodeCompleted, SearchTarget

OBJECTS = ("apple", "carrot", "knife", "coin", "key", "lamp")


@dataclass
class PlayedStep:
    """A step as the planner has it before recording: the sandbox's transition, the target, the reward."""

    transition: Transition
    target: SearchTarget
    reward: float


def make_step(
    goal: str,
    observation: str,
    actions: Sequence[str],
    taken: int,
    reward: float = 0.0,
    visits: Sequence[float] | None = None,
    q: Sequence[float] | None = None,
    root_value: float = 0.0,
    template: str = "",
) -> PlayedStep:
    """One step; `visits=None` leaves the search target empty (a demonstration step)."""
    target = SearchTarget()
    if visits is not None:
        target = SearchTarget(
            actions=list(actions),
            visit_probs=list(visits),
            q_values=list(q) if q is not None else [0.0] * len(actions),
            priors=[1.0 / len(actions)] * len(actions),
            root_value=root_value,
        )
    transition = Transition(
        before=Observation(text=observation, goal=goal, valid_actions=list(actions)),
        action=Action(text=actions[taken], template=template),
    )
    return PlayedStep(transition, target, reward)


def make_episode(
    episode_id: str, steps: Sequence[PlayedStep], won: bool = False, policy_version: str = ""
) -> EpisodeCompleted:
    """The episode as the planner records it: each step leads to the next one's state."""
    episode = EpisodeCompleted(episode_id=episode_id, won=won, total_reward=sum(s.reward for s in steps),
                               policy_version=policy_version)
    for i, step in enumerate(steps):
        step.transition.step_index = i
        if i + 1 < len(steps):
            step.transition.after.CopyFrom(steps[i + 1].transition.before)
        record_step(episode, step.transition, step.target, step.reward)
    return episode


def take_task_episode(
    episode_id: str, rng: np.random.Generator, won: bool = True, version: str = ""
) -> EpisodeCompleted:
    """A two-step synthetic task the policy can learn from text alone: take the named object, then
    eat it. The search's visits favour the right action."""
    target, other = rng.choice(len(OBJECTS), size=2, replace=False)
    obj, dis = OBJECTS[target], OBJECTS[other]
    goal = f"Your task is to eat the {obj}."
    first = [f"take {obj}", f"take {dis}", "go north", "inventory"]
    second = [f"eat {obj}", f"drop {obj}", "go south", "look"]
    order = rng.permutation(4)
    first = [first[i] for i in order]
    right = int(np.flatnonzero(order == 0)[0])
    visits = [0.1] * 4
    visits[right] = 0.7
    q = [0.0] * 4
    q[right] = 1.0
    steps = [
        make_step(goal, f"You see a {obj} and a {dis}.", first, right, 0.0, visits, q, 0.5),
        make_step(goal, f"You carry the {obj}.", second, 0, 1.0, [0.85, 0.05, 0.05, 0.05], [1, 0, 0, 0], 0.8),
    ]
    return make_episode(episode_id, steps, won=won, policy_version=version)


def test_returns_are_discounted_sums_to_the_end() -> None:
    steps = [make_step("g", f"o{i}", ["a", "b"], 0, reward=r) for i, r in enumerate([0.0, 0.0, 1.0])]
    examples = episode_examples(make_episode("e", steps), gamma=0.5)
    assert [e.ret for e in examples] == [0.25, 0.5, 1.0]
    assert [e.step_index for e in examples] == [0, 1, 2]


def test_search_target_gives_candidates_visits_and_q() -> None:
    step = make_step("g", "o", ["open door", "take key from box"], 1, visits=[1, 3], q=[0.2, 0.9], root_value=0.7)
    (ex,) = episode_examples(make_episode("e", [step]))
    assert ex.actions == ("open door", "take key from box")
    np.testing.assert_allclose(ex.visit_probs, [0.25, 0.75])
    np.testing.assert_allclose(ex.q_values, [0.2, 0.9])
    assert ex.q_mask.tolist() == [True, True]
    assert ex.taken == 1 and ex.root_value == pytest.approx(0.7)
    assert ex.templates == ("open X", "take X from Y")  # heuristic templates for the candidates


def test_unvisited_actions_have_no_q_estimate() -> None:
    step = make_step("g", "o", ["a", "b", "c"], 0, visits=[1, 0, 0], q=[0.5, 0, 0])
    (ex,) = episode_examples(make_episode("e", [step]))
    assert ex.q_mask.tolist() == [True, False, False]


def test_demonstration_step_is_one_hot_imitation() -> None:
    step = make_step("g", "o", ["a", "b", "c"], 2, template="the skill")
    (ex,) = episode_examples(make_episode("e", [step]))
    assert ex.visit_probs.tolist() == [0, 0, 1]
    assert not ex.q_mask.any() and math.isnan(ex.root_value)
    assert ex.templates[2] == "the skill"  # the transition's own template wins for the executed action


def test_candidates_leading_back_to_a_visited_state_are_marked_for_theta() -> None:
    step = make_step("g", "o", ["move west", "move east"], 0, visits=[1, 1])
    step.target.seen.extend([True, False])
    (ex,) = episode_examples(make_episode("e", [step]))
    assert ex.seen == (True, False)
    assert [text for text, _ in ex.candidates()] == [candidate_text("move west", True), "move east"]
    assert candidate_text("move west", True) != "move west"
    # A target without the marks (an older planner) reads every candidate unmarked.
    (plain,) = episode_examples(make_episode("e", [make_step("g", "o", ["a", "b"], 0, visits=[1, 1])]))
    assert [text for text, _ in plain.candidates([1])] == ["b"]


def test_what_the_agent_read_stays_in_the_goal_text_of_later_steps() -> None:
    steps = [make_step("Cook a meal.", "A kitchen.", ["read cookbook", "take knife"], 0),
             make_step("Cook a meal.", "Recipe: slice the carrot.", ["take knife", "open fridge"], 0),
             make_step("Cook a meal.", "You take the knife.", ["open fridge", "read note"], 0)]
    examples = episode_examples(make_episode("e", steps))
    assert [ex.goal for ex in examples] == ["Cook a meal."] + ["Cook a meal.\nNotes: Recipe: slice the carrot."] * 2
    # The planner tracks the notes the same way while it plays (one function for both).
    assert notes_along("", ["read cookbook", "take knife"], ["Recipe: slice the carrot.", "Taken."]) == \
        "Recipe: slice the carrot."
    assert notes_along("old", ["read note"], ["new"]) == "new" and notes_along("old", ["read note"], [" "]) == "old"


def test_skills_only_for_successful_episodes() -> None:
    steps = [make_step("g", "o", ["take apple", "open fridge"], i) for i in (0, 1, 0)]
    assert episode_examples(make_episode("e", steps, won=True))[0].skills == ("take X", "open X")
    assert episode_examples(make_episode("e", steps, won=False))[0].skills == ()


def test_state_text_joins_feedback_room_and_inventory() -> None:
    obs = Observation(text="You take the apple.", goal="eat", look="Kitchen.", inventory="an apple")
    assert state_text(obs) == ("eat", "You take the apple.\nKitchen.\nan apple")
    assert state_text(Observation(text="Kitchen.", look="Kitchen.")) == ("", "Kitchen.")


def test_make_inputs_pads_and_masks() -> None:
    feat = HashingFeaturizer(16)
    vocab = SkillVocab(8)
    inputs = make_inputs(
        feat, vocab.add, [("g1", "o1"), ("g2", "o2")], [[("take apple", "take X")], [("go", "go"), ("eat", "eat X")]]
    )
    assert inputs.state_feat.shape == (2, 32) and inputs.action_feat.shape == (2, 2, 16)
    assert inputs.mask.tolist() == [[True, False], [True, True]]
    assert inputs.template_ids.tolist() == [[1, 0], [2, 3]]
    np.testing.assert_array_equal(inputs.action_feat[0, 1], 0)
    np.testing.assert_allclose(inputs.state_feat[1, 16:], feat.encode(["o2"])[0])


def test_vocab_grows_until_full_then_maps_to_unknown() -> None:
    vocab = SkillVocab(3)
    assert [vocab.add(t) for t in ("a", "b", "c", "a", "")] == [1, 2, 0, 1, 0]
    assert vocab.get("never seen") == 0 and len(vocab) == 3
    assert SkillVocab.from_dict(vocab.to_dict()).templates == ["a", "b"]


def test_an_unlisted_action_is_matched_to_the_listed_one_naming_it() -> None:
    from evoskill.core.learn.data import listed_equivalent

    listed = ["focus on outside", "focus on hatchling hatchling turtle", "activate stopwatch", "move seed jar"]
    assert listed_equivalent("focus on hatchling turtle in outside", listed) == 1  # the longest leading part
    assert listed_equivalent("activate stopwatch in inventory", listed) == 2
    assert listed_equivalent("move pea seed in seed jar to flower pot 1", listed) == -1  # not a leading part
    assert listed_equivalent("focus on hatchling turtle", [*listed, "focus on turtle hatchling"]) == -1  # a tie
    assert listed_equivalent("look", listed) == -1


def test_a_demonstrated_unlisted_action_is_imitated_as_its_listed_equivalent() -> None:
    step = make_step("Focus on the turtle.", "You see a turtle.", ["focus on turtle in outside", "wait"], 0)
    step.transition.before.ClearField("valid_actions")
    step.transition.before.valid_actions.extend(["wait", "focus on turtle turtle"])
    step.target.actions.extend(["wait", "focus on turtle turtle"])
    (example,) = episode_examples(make_episode("e", [step], won=True))
    assert example.actions[example.taken] == "focus on turtle turtle" and example.visit_probs[example.taken] == 1.0


def test_a_demonstrated_action_no_list_names_becomes_a_candidate_of_its_step() -> None:
    """ScienceWorld never lists "pick up seed jar", which its grow-plant gold paths take: θ learns to choose it."""
    step = make_step("Grow a plant.", "You see a seed jar.", ["pick up seed jar", "focus on seed jar"], 0,
                     template="pick up X")
    step.transition.before.ClearField("valid_actions")
    step.transition.before.valid_actions.append("focus on seed jar")
    step.target.actions.append("focus on seed jar")
    step.target.templates.append("focus on X")
    step.target.seen.append(True)
    step.transition.before.inventory = "In your inventory, you see: an orange"
    step.transition.after.inventory = "In your inventory, you see: a seed jar, an orange"
    (example,) = episode_examples(make_episode("e", [step], won=True))
    assert example.unlisted and example.actions == ("focus on seed jar", "pick up seed jar")
    assert example.taken == 1 and example.visit_probs.tolist() == [0.0, 1.0]
    assert example.templates == ("focus on X", "pick up X") and example.seen == (True, False)
    step.transition.after.inventory = step.transition.before.inventory  # it changed nothing: a door already open
    assert not episode_examples(make_episode("e", [step], won=True))  # nothing to imitate
    searched = make_step("Grow a plant.", "You see a seed jar.", ["focus on seed jar", "wait"], 0, visits=[1, 1])
    searched.transition.action.text = "pick up seed jar"  # a search's step that took what it did not consider
    (kept,) = episode_examples(make_episode("s", [searched]))
    assert not kept.unlisted and kept.actions == ("focus on seed jar", "wait") and kept.taken == -1


def test_theta_can_read_the_last_actions_taken_as_the_planner_gives_them() -> None:
    steps = [make_step("g", f"o{i}", ["go east", "go south"], i % 2, visits=[1, 1]) for i in range(3)]
    examples = episode_examples(make_episode("e", steps))
    assert [ex.recent for ex in examples] == [(), ("go east",), ("go east", "go south")]
    assert examples[2].state(0) == (examples[2].goal, examples[2].observation)  # a θ trained without them
    goal, seen = examples[2].state(1)
    assert seen == with_recent(examples[2].observation, ["go south"]) and seen.endswith("You did: go south")
    # The planner's view of the same state: its own observation and the episode's last action.
    assert state_text(Observation(text="o2", goal="g"), "", ["go south"]) == (goal, seen)


def test_theta_can_read_which_kinds_of_action_raised_the_score_however_long_ago() -> None:
    actions = ["focus on frog", "look around", "focus on orange"]
    steps = [make_step("g", f"o{i}", actions, 0 if i == 0 else 1, visits=[1, 1, 1]) for i in range(4)]
    for i, step in enumerate(steps):
        step.transition.before.score = 0.0 if i == 0 else 0.5  # the focus scored; looking around did not
    examples = episode_examples(make_episode("e", steps))
    assert [ex.scored for ex in examples] == [(), ("focus on frog",), ("focus on frog",), ("focus on frog",)]
    assert [text for text, _ in examples[0].candidates(scored=True)] == actions  # nothing scored yet
    assert [text for text, _ in examples[3].candidates(scored=True)] == [
        candidate_text("focus on frog", False, (), True), "look around", "focus on orange (scored before)"]
    assert [text for text, _ in examples[3].candidates()] == actions  # a θ trained without the marks
