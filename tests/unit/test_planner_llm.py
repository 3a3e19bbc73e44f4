"""LLM advice without an LLM: reply parsing, the bonus it becomes, tips from memories, the prompt."""

from __future__ import annotations

import pytest

from evoskill.memory.v1 import memory_pb2
from evoskill.planner.llm import (
    LlmProposer,
    choice_bonus,
    from_settings,
    parse_choices,
    tips_from_memories,
    user_message,
)
from evoskill.platform.config import LlmSettings, Settings

ACTIONS = ["open door", "take coin", "go to room 2", "go to room 12", "take coin from box"]


@pytest.mark.parametrize(("reply", "expected"), [
    ("2, 1", [1, 0]),
    ("3", [2]),
    ("Best: 5 then 2.", [4, 1]),
    ("2, 2, 1", [1, 0]),  # repeats count once
    ("0, 9, 42, 2", [1]),  # out of range (numbers are 1-based) ignored
    ("take coin", [1]),
    ("Take Coin from box, then open door", [4, 0]),  # the longest action written wins over one inside it
    ("go to room 12", [3]),  # echoed text with a number in it is that action, not action 12 or 2
    ("2. take coin\n1. open door", [1, 0]),
    ("<think>maybe 4? no.</think>1", [0]),  # a reasoning model's scratchpad is not the answer
    ("I cannot help with that.", []),
    ("", []),
])
def test_replies_are_parsed_into_distinct_choices_best_first(reply: str, expected: list[int]) -> None:
    assert parse_choices(reply, ACTIONS) == expected


def test_the_first_choice_gets_the_full_weight_and_later_ones_less() -> None:
    bonus = choice_bonus([2, 0], 4, 1.5)
    assert bonus.tolist() == pytest.approx([0.75, 0.0, 1.5, 0.0])
    assert not choice_bonus([], 3, 1.0).any()


def scored(action: str, *, success: bool = False, reward: float = 0.0,
           feedback: str = "") -> memory_pb2.ScoredExperience:
    experience = memory_pb2.Experience(action=action, success=success, reward=reward, feedback=feedback)
    return memory_pb2.ScoredExperience(experience=experience, similarity=0.9, score=0.9)


def test_tips_say_what_an_action_did_in_one_line_each() -> None:
    memories = [
        scored("take coin", success=True, reward=1.0, feedback="You take the coin.\n\nYour score went up."),
        scored("open door", reward=-0.5),
        scored("", success=True),  # nothing to recommend
        scored("take coin", success=True, reward=1.0, feedback="You take the coin.\n\nYour score went up."),
        scored("look", reward=0.2),
        scored("wait"),
    ]
    tips = tips_from_memories(memories, limit=10)
    assert len(tips) == 4 and all("\n" not in t for t in tips)
    assert tips[0].startswith("in a similar state, 'take coin' was part of an episode that succeeded")
    assert "You take the coin. Your score went up." in tips[0]
    assert "'open door' was penalised (reward -0.50)" in tips[1]
    assert "'look' earned reward +0.20" in tips[2] and "'wait' achieved nothing" in tips[3]
    assert tips_from_memories(memories, limit=2) == tips[:2]
    assert len(tips_from_memories([scored("x", feedback="y" * 500)], 1)[0]) < 150


def test_the_prompt_numbers_the_actions_from_one_and_lists_the_tips() -> None:
    text = user_message("find the coin", "You are in a hall.", ["open door", "take coin"], ["tip one"])
    assert "Goal: find the coin" in text and "You are in a hall." in text
    assert "1. open door\n2. take coin" in text and "- tip one" in text
    assert "Tips" not in user_message("g", "s", ["a", "b"], [])


def test_no_base_url_means_no_llm_and_no_request() -> None:
    assert from_settings(Settings(llm=LlmSettings())) is None
    proposer = from_settings(Settings(llm=LlmSettings(base_url="http://127.0.0.1:9/v1", model="m")))
    assert isinstance(proposer, LlmProposer)
    assert proposer.url == "http://127.0.0.1:9/v1/chat/completions"
    # one candidate or none: nothing to ask, so no request to the (unreachable) server
    assert proposer.rank("g", "s", ["only"], []).tolist() == [0.0]
    assert proposer.choose("g", "s", ["only"], []) == 0 and proposer.choose("g", "s", [], []) is None
    assert proposer.rank("g", "s", [], []).shape == (0,) and proposer.requests == 0
    proposer.close()

