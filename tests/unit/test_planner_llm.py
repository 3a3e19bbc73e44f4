"""LLM advice without an LLM: reply parsing, the bonus it becomes, tips from memories, the prompt."""

from __future__ import annotations

import pytest

from evoskill.planner.llm import (
    LlmProposer,
    choice_bonus,
    from_settings,
    parse_choices,
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

