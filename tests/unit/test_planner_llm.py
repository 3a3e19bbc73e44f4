"""The LLM's pure parts (core/llm) without an LLM: reading rankings and proposals, the tools' grammar rebuilt
from a goal, the prompts, the LLM's prior and its combination with θ's."""

from __future__ import annotations

import numpy as np
import pytest

from evoskill.core.llm import (
    combine,
    grammar_of,
    llm_prior,
    parse_answer,
    parse_choices,
    parse_value,
    prompt,
    value_prompt,
)
from evoskill.envs.tools.calls import ToolInfo, tools_in_goal
from evoskill.planner.llm import from_settings
from evoskill.platform.config import LlmSettings, Settings

ACTIONS = ["open door", "take coin", "go to room 2", "go to room 12", "take coin from box"]
BOOK = ToolInfo("get_price", "Price of a book.", {
    "type": "object", "required": ["isbn"],
    "properties": {"isbn": {"type": "string"}, "currency": {"enum": ["EUR", "USD"]}, "copies": {"type": "integer"}},
}, source="shop")
GOAL = ("Which book is the cheapest?\n\nTools:\n"
        f"- {BOOK.signature()}: Price of a book.\n- search_books(): All books.\n"
        "- final_answer(answer): give the final answer; ends the task\n- ask_clarification(): ask the user")


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
def test_rankings_are_parsed_into_distinct_choices_best_first(reply: str, expected: list[int]) -> None:
    assert parse_choices(reply, ACTIONS) == expected


def test_the_goal_gives_back_the_tools_schemas_as_far_as_their_signatures_tell() -> None:
    tools = tools_in_goal(GOAL)
    assert set(tools) == {"get_price", "search_books"}  # meta actions are the env's own, not tools
    schema = tools["get_price"].schema
    assert schema["required"] == ["isbn"] and schema["properties"] == BOOK.schema["properties"]
    assert tools["get_price"].signature() == BOOK.signature() and tools["search_books"].params == []
    assert tools_in_goal("collect the coin") == {}


def test_proposals_are_read_checked_against_the_tools_and_written_canonically() -> None:
    listed = ["search_books()", "ask_clarification()"]
    reply = ("<think>the shop first</think>\n```\n2\n- get_price('978-1', currency='USD')\n"
             "get_price(isbn='978-2', currency='GBP')\nbuy_book(isbn='978-1')\nsearch_books()\n"
             "get_price(isbn=\"978-3\")\nfinal_answer(answer='Dune')\nget_price(isbn='978-4')\n```")
    answer = parse_answer(reply, listed, grammar_of(GOAL), limit=3)
    new = ["get_price(isbn='978-1', currency='USD')", "get_price(isbn='978-3')", "final_answer(answer='Dune')"]
    assert answer.new == new  # at most 3 new ones; a listed call is that candidate, however written
    assert answer.ranked == ["ask_clarification()", new[0], "search_books()", *new[1:]]
    why = dict(answer.rejected)
    assert "'GBP' is not one of ['EUR', 'USD']" in why["get_price(isbn='978-2', currency='GBP')"]
    assert "no tool 'buy_book'" in why["buy_book(isbn='978-1')"]


def test_without_tools_a_proposal_is_free_text_and_numbers_name_candidates() -> None:
    answer = parse_answer("3, 1\n  dance   wildly \n\n9", ACTIONS, grammar_of("collect the coin"), limit=2)
    assert answer.ranked == ["go to room 2", "open door", "dance wildly"] and answer.new == ["dance wildly"]
    assert answer.rejected == [("9", "no candidate 9")]


def test_the_prompts_number_the_candidates_and_list_the_tips() -> None:
    ranking = prompt("find the coin", "You are in a hall.", ["open door", "take coin"], ["tip one"], propose=False)
    assert "Goal: find the coin" in ranking.user and "You are in a hall." in ranking.user
    assert "1. open door\n2. take coin" in ranking.user and "- tip one" in ranking.user
    assert "numbers" in ranking.system and not ranking.propose
    proposing = prompt(GOAL, "The shop is open.", [], [], propose=True, limit=2)
    assert "Candidate actions" not in proposing.user and "Tips" not in proposing.user
    assert "at most 2 actions" in proposing.system and proposing.messages()[1]["content"] == proposing.user



def test_a_long_list_is_shown_by_kind_and_the_llm_proposes_from_it() -> None:
    calls = [f"cd(folder='d{i}')" for i in range(30)] + [f"ls(a={b})" for b in (True, False)] + ["final_answer()"]
    kinds = ["cd(folder)"] * 30 + ["ls(a)"] * 2 + ["final_answer(answer)"]
    request = prompt("tidy the files", "You are in /.", calls, [], propose=False, kinds=kinds, max_listed=5)
    assert request.propose and "at most 3 actions" in request.system  # ranking 33 would list them all
    # every kind one example before any shows two (5 in all), spread over the kind, numbered kind by kind
    assert request.numbered == ("cd(folder='d0')", "cd(folder='d15')", "ls(a=True)", "ls(a=False)", "final_answer()")
    assert "- cd(folder) (30): 1. cd(folder='d0'); 2. cd(folder='d15')" in request.user
    assert "- final_answer(answer) (1): 5. final_answer()" in request.user and "d1'" not in request.user
    answer = parse_answer("2\ncd(folder='d17')\nmkdir(x=1)", calls, grammar_of("tidy"), limit=3,
                          numbered=request.numbered)
    assert answer.ranked == ["cd(folder='d15')", "cd(folder='d17')", "mkdir(x=1)"]  # a number names a shown one;
    assert answer.new == ["mkdir(x=1)"]  # an unshown listed action written out is that candidate, not a new one
    short = prompt("tidy the files", "You are in /.", calls[:4], [], propose=False, kinds=kinds[:4], max_listed=5)
    assert not short.propose and "4. cd(folder='d3')" in short.user and short.numbered == tuple(calls[:4])
    assert len(request.user) < len(prompt("tidy", "/", calls, [], propose=False).user)


@pytest.mark.parametrize(("reply", "chance"), [
    ("75", 0.75), ("About 40%.", 0.4), ("0.7", 0.7), ("1.0", 1.0), ("100", 1.0), ("250", 1.0), ("0", 0.0),
    ("<think>maybe 90</think> 20", 0.2), ("no idea", None), ("", None),
])
def test_a_judgement_is_read_as_a_chance(reply: str, chance: float | None) -> None:
    assert parse_value(reply) == chance


def test_the_value_prompt_shows_the_goal_the_way_there_and_the_state() -> None:
    request = value_prompt("find the coin", "You are in a hall.", ["go north", "open door"])
    assert "Goal: find the coin" in request.user and "- go north\n- open door" in request.user
    assert "You are in a hall." in request.user and "0 to 100" in request.system and not request.propose

def test_the_llms_prior_favours_its_choices_and_rules_nothing_out() -> None:
    prior = llm_prior([2, 0], 4)
    assert prior.sum() == pytest.approx(1.0) and prior[2] > prior[0] > prior[1] == prior[3] > 0
    assert llm_prior([], 3).tolist() == pytest.approx([1 / 3] * 3)


def test_theta_and_the_llm_combine_by_the_rule() -> None:
    theta = np.log(np.array([0.7, 0.2, 0.1]))
    prior = llm_prior([2], 3)  # the LLM likes the action θ likes least
    product = combine(theta, prior, "product", 1.0)
    np.testing.assert_allclose(product - theta, np.log(prior))
    mixed = np.exp(combine(theta, prior, "mix", 0.5))
    np.testing.assert_allclose(mixed, 0.5 * np.exp(theta) + 0.5 * prior)
    np.testing.assert_allclose(np.exp(combine(theta, prior, "mix", 0.0)), np.exp(theta))  # weight 0: θ alone
    np.testing.assert_allclose(combine(None, prior, "product", 2.0), 2.0 * np.log(prior))  # no θ: uniform
    with pytest.raises(ValueError, match="not one of product, mix"):
        combine(theta, prior, "max", 1.0)


def test_settings_refuse_a_mix_weight_above_one_and_no_base_url_means_no_client() -> None:
    with pytest.raises(ValueError, match="mix needs prior_weight <= 1"):
        LlmSettings(combine="mix", prior_weight=2.0)
    assert from_settings(Settings(llm=LlmSettings())) is None
