"""The schema of limits every service edge checks (core/limits.py): what it refuses, how it says so, and that
whatever it lets through holds only finite numbers."""

from __future__ import annotations

import math

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput
from evoskill.core.limits import ECHO_CHARS, MESSAGE_CHARS, bounded, check_message
from evoskill.core.search_config import SearchConfig
from evoskill.events.v1 import events_pb2
from evoskill.learner.v1 import learner_pb2
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.v1 import planner_pb2
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.v1 import sandbox_pb2
from tests.messages import messages


def refusal(message: Message) -> str:
    with pytest.raises(InvalidInput) as err:
        check_message(message)
    return str(err.value)


def searched_step(**target: object) -> events_pb2.EpisodeStep:
    fields: dict[str, object] = {"actions": ["go north", "go south"], "visit_probs": [0.75, 0.25],
                                 "q_values": [0.5, 0.1], "priors": [0.5, 0.5]}
    fields.update(target)
    return events_pb2.EpisodeStep(action=common_pb2.Action(text="go north"), reward=0.1,
                                  target=events_pb2.SearchTarget(**fields))  # type: ignore[arg-type]


def test_a_poisoned_episode_is_refused_naming_the_field() -> None:
    good = events_pb2.EpisodeCompleted(episode_id="e1", fold="train", steps=[searched_step()])
    check_message(good)
    nan_reward = events_pb2.EpisodeCompleted(episode_id="e1", steps=[searched_step(), searched_step()])
    nan_reward.steps[1].reward = math.nan
    assert refusal(nan_reward).startswith("steps[1].reward is nan, not a finite number")
    short_q = events_pb2.EpisodeCompleted(episode_id="e1", steps=[searched_step(q_values=[0.5])])
    assert refusal(short_q) == "steps[0].target.q_values has 1 entries for 2 actions (give one per action, or none)"
    inf_q = events_pb2.EpisodeCompleted(episode_id="e1", steps=[searched_step(q_values=[0.5, math.inf])])
    assert refusal(inf_q).startswith("steps[0].target.q_values[1] is inf")
    negative = events_pb2.EpisodeCompleted(episode_id="e1", steps=[searched_step(visit_probs=[1.5, -0.5])])
    assert "visit_probs holds a negative probability" in refusal(negative)
    huge = events_pb2.EpisodeCompleted(episode_id="e1", total_reward=1e300, steps=[searched_step()])
    assert refusal(huge).startswith("total_reward is 1e+300, not a finite number of at most 1e+09")


@pytest.mark.parametrize(("message", "named"), [
    (sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", step_quota=-1), "step_quota"),
    (sandbox_pb2.SimulateRequest(probes=[sandbox_pb2.Probe(rollout_depth=10**6)]), "probes[0].rollout_depth"),
    (planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", max_steps=10**6), "max_steps"),
    (planner_pb2.SearchRequest(config=planner_pb2.SearchConfig(c_puct=math.nan)), "config.c_puct is nan"),
    (reward_pb2.ScoreRequest(transition=common_pb2.Transition(env_reward=math.nan)), "transition.env_reward"),
    (memory_pb2.StoreRequest(experiences=[memory_pb2.Experience(goal="g", reward=math.inf)]),
     "experiences[0].reward is inf"),
    (memory_pb2.RetrieveRequest(goal="g", limit=10**6), "limit"),
    (learner_pb2.TrainRequest(steps=10**7), "steps must be in [1, 1000000]"),
    (learner_pb2.TrainRequest(steps=1, wait_seconds=math.nan), "wait_seconds"),
    (learner_pb2.TrainRequest(steps=1, seed=-1), "seed must be >= 0, got -1"),
    (planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=-5), "seed must be >= 0"),
    (events_pb2.RewardScored(total=1.0, terms={"loop": math.nan}), "terms['loop'] is nan"),
])
def test_every_edge_message_is_refused_naming_its_field(message: Message, named: str) -> None:
    assert named in refusal(message)


def test_an_oversized_value_is_echoed_as_a_bounded_prefix() -> None:
    reason = refusal(events_pb2.EpisodeCompleted(episode_id="x" * 1_000_000, steps=[searched_step()]))
    assert reason.startswith("episode_id is 1000000 characters, over the limit of 256")
    assert "(1000000 characters)" in reason and len(reason) < 100 + ECHO_CHARS
    action = refusal(sandbox_pb2.StepRequest(session_id="s", action="y" * 5000))
    assert action.startswith("action is 5000 characters, over the limit of 1024")
    assert len(bounded("z" * 10**6)) < MESSAGE_CHARS + 40


def test_a_bad_search_setting_echoes_a_bounded_prefix() -> None:
    with pytest.raises(InvalidInput) as err:
        SearchConfig(algorithm="q" * 10_000)
    assert "algorithm" in str(err.value) and len(str(err.value)) < 400


EDGE_TYPES = [sandbox_pb2.CreateSessionRequest, sandbox_pb2.SimulateRequest, reward_pb2.ScoreRequest,
              memory_pb2.StoreRequest, memory_pb2.RetrieveRequest, planner_pb2.PlayEpisodeRequest,
              learner_pb2.TrainRequest, events_pb2.EpisodeCompleted, events_pb2.RewardScored,
              events_pb2.StepExecuted, events_pb2.PolicyPublished]


def numbers(message: Message) -> list[float]:
    """Every float of `message`, nested ones included."""
    found: list[float] = []
    for field, value in message.ListFields():
        entry = field.message_type
        items = list(value.values()) if entry is not None and entry.GetOptions().map_entry else \
            list(value) if field.is_repeated else [value]
        for item in items:
            if isinstance(item, Message):
                found += numbers(item)
            elif field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT) or isinstance(item, float):
                found.append(float(item))
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(EDGE_TYPES).flatmap(messages))
def test_any_message_is_either_refused_as_bad_input_or_holds_only_finite_numbers(message: Message) -> None:
    try:
        check_message(message)
    except InvalidInput as exc:
        assert len(str(exc)) < MESSAGE_CHARS
        return
    assert all(math.isfinite(x) for x in numbers(message))
