"""Exploration switches (core/exploration.py): ε-greedy over any agent, count-based novelty in θ alone and at the
search root, and the exploration each step records."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from evoskill.common.v1 import common_pb2
from evoskill.core.agent import Decision, EpisodeMemory, Step
from evoskill.core.exploration import EPSILON, NOVELTY, UNCERTAIN, EpsilonGreedy, novelty_bonus
from evoskill.core.learn.data import episode_examples
from evoskill.core.reward import Scorer
from evoskill.core.search_config import SearchConfig
from evoskill.events.v1 import events_pb2
from evoskill.library.generate import HostSandbox, LocalReward
from evoskill.planner.agents import AgentTools, PolicyAgent
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import RewardSettings, Settings
from evoskill.sandbox.v1 import sandbox_pb2

Batch = Sequence[tuple[str, str, Sequence[str], Sequence[str]]]


def fond_of(favourite: str):  # type: ignore[no-untyped-def]
    """A θ that gives `favourite` 2 of logit and everything else 0."""

    def policy(batch: Batch) -> tuple[list[np.ndarray], np.ndarray]:
        return [np.array([2.0 if a.split(" (")[0] == favourite else 0.0 for a in actions])
                for _, _, actions, _ in batch], np.zeros(len(batch))

    return policy


class Always:
    """An agent that always answers the same decision (the one wrapped)."""

    def __init__(self, action: str, stepped: object = None) -> None:
        self.action, self.stepped = action, stepped

    def act(self, step: Step) -> Decision:
        return Decision(self.action, events_pb2.SearchTarget(actions=list(step.observation.valid_actions)),
                        stepped=self.stepped)


def step_at(seed: int) -> Step:
    obs = common_pb2.Observation(valid_actions=[f"go {i}" for i in range(10)])
    return Step("s", obs, 0, seed, EpisodeMemory())


def test_the_novelty_bonus_is_weight_over_count_plus_one() -> None:
    assert novelty_bonus(np.array([0, 1, 3]), 2.0) == pytest.approx([2.0, 1.0, 0.5])


def test_epsilon_greedy_replaces_the_choice_with_its_probability_and_says_so() -> None:
    never = [EpsilonGreedy(Always("go 0"), 0.0).act(step_at(s)) for s in range(50)]
    assert all(d.action == "go 0" and d.exploration == "" for d in never)
    always = [EpsilonGreedy(Always("go 0"), 1.0).act(step_at(s)) for s in range(50)]
    assert all(d.exploration == EPSILON and d.action in step_at(0).observation.valid_actions for d in always)
    assert len({d.action for d in always}) > 3  # uniform over the candidates, not one of them
    half = [EpsilonGreedy(Always("go 0"), 0.5).act(step_at(s)).exploration for s in range(400)]
    assert 150 < half.count(EPSILON) < 250
    # seeded by the step: the same step explores the same way
    assert [EpsilonGreedy(Always("go 0"), 0.5).act(step_at(s)).action for s in range(20)] == \
           [EpsilonGreedy(Always("go 0"), 0.5).act(step_at(s)).action for s in range(20)]


def test_epsilon_never_overrides_a_step_already_taken_for_real() -> None:
    taken = EpsilonGreedy(Always("go 0", stepped=object()), 1.0).act(step_at(3))
    assert taken.action == "go 0" and taken.exploration == ""


def test_novelty_turns_theta_alone_to_what_the_episode_has_tried_less() -> None:
    tools = AgentTools(HostSandbox(), SearchConfig(), Scorer(RewardSettings()))
    session = tools.sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=0, fold="test",
                                                                           episode_id="e"))
    favourite = next(a for a in session.observation.valid_actions if a.startswith("move"))  # not a no-op
    memory = EpisodeMemory(streak=(favourite, 4))  # taken four times in a row just now, without progress
    step = Step(session.session_id, session.observation, 4, 4, memory)
    plain = SearchConfig(prefetch_children=0, policy_revisit_penalty=0.0)  # unstepped: counts are times taken
    greedy = PolicyAgent(tools, fond_of(favourite), "twx:coin", plain).act(step)
    assert (greedy.action, greedy.exploration) == (favourite, "")
    novel = PolicyAgent(tools, fond_of(favourite), "twx:coin",
                        plain.model_copy(update={"novelty_weight": 5.0})).act(step)
    assert novel.action != favourite and novel.exploration == NOVELTY


def play(config: planner_pb2.SearchConfig, agent: str = "policy") -> EpisodePlayer:
    player = EpisodePlayer(HostSandbox(), LocalReward(Settings()), SearchConfig(), Scorer(RewardSettings()),
                           fond_of("move west"))
    config.agent, config.num_simulations = agent, 4
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=6, config=config)
    updates = list(player.play(request))
    assert [u.exploration for u in updates if u.action] == [s.exploration for s in player.completed.steps]
    return player


def test_each_step_records_its_exploration_and_the_learner_imitates_none_of_epsilons() -> None:
    explored = play(planner_pb2.SearchConfig(explore_epsilon=1.0)).completed
    assert explored.steps and all(s.exploration == EPSILON for s in explored.steps)
    assert episode_examples(explored) == []  # θ alone's random picks teach θ nothing
    greedy = play(planner_pb2.SearchConfig()).completed
    assert all(s.exploration == "" for s in greedy.steps)
    assert len(episode_examples(greedy)) == len(greedy.steps)


def test_a_step_searched_because_theta_was_unsure_is_recorded_as_such() -> None:
    unsure = play(planner_pb2.SearchConfig(entropy_trigger=0.01), agent="policy+mcts").completed
    assert unsure.steps and all(s.exploration == UNCERTAIN for s in unsure.steps if s.target.visit_probs)
