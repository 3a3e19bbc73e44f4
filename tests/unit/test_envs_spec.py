"""Spec strings, templates and the environment listing: no JVM, no game generation."""

from __future__ import annotations

import pytest

from evoskill.envs import (
    EnvSpec,
    EnvSpecError,
    TemplateMatcher,
    describe_environments,
    heuristic_template,
    list_environments,
    make_env,
    parse_spec,
)
from evoskill.envs.spec import TWX_GAMES
from evoskill.envs.textworld_env import textworld_available


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("twx:coin", "twx:coin"),
        ("twx:coincollector", "twx:coin"),
        ("textworld-express:Coin-Collector?numLocations=5", "twx:coin?numLocations=5"),
        (
            "twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,limitInventorySize=0",
            "twx:cookingworld?includeDoors=0,limitInventorySize=0,numDistractorItems=3,numIngredients=2,numLocations=1",
        ),
        ("twx:cooking?numLocations=1 & includeDoors=0", "twx:cookingworld?includeDoors=0,numLocations=1"),
        ("twx:simon-says", "twx:simonsays"),
        ("twx:pecking_order", "twx:peckingorder"),
        ("sciworld:boil", "sciworld:boil"),
        ("scienceworld:1-1", "sciworld:boil"),
        (
            "sw:find_living_thing?openDoors=true,teleportaction=1",
            "sciworld:find-living-thing?openDoors=1,teleportAction=1",
        ),
        ("sciworld:Matter Changes of State (Boiling)", "sciworld:boil"),
    ],
)
def test_good_specs_parse_to_canonical(spec: str, canonical: str) -> None:
    parsed = parse_spec(spec)
    assert parsed.canonical() == canonical
    assert str(parsed) == canonical
    assert parse_spec(parsed.canonical()) == parsed
    assert parse_spec(parsed) == parsed
    assert {parsed: 1}[parse_spec(canonical)] == 1


def test_spec_fields() -> None:
    spec = parse_spec("twx:twc?numLocations=3,includeDoors=1")
    assert spec == EnvSpec("twx", "twc", {"numLocations": "3", "includeDoors": "1"})
    assert spec.scheme == "twx" and spec.name == "twc"
    assert spec.params == {"includeDoors": "1", "numLocations": "3"}


@pytest.mark.parametrize(
    ("spec", "must_name", "must_list"),
    [
        ("", "empty", "twx"),
        ("coin", "no scheme", "sciworld"),
        ("gym:CartPole", "'gym'", "twx, tw, sciworld"),
        ("twx:chess", "'chess'", "cookingworld"),
        ("twx:coin?numIngredients=2", "'numIngredients'", "numLocations"),
        ("twx:arithmetic?numLocations=2", "'numLocations'", "none"),
        ("twx:coin?numLocations=five", "numLocations='five'", "integer"),
        ("twx:coin?numLocations", "'numLocations'", "key=value"),
        ("twx:coin?numLocations=", "'numLocations'", "empty value"),
        ("twx:coin?numLocations=2,numLocations=3", "'numLocations'", "twice"),
        ("twx:coin?a=1,,b=2", "empty parameter", "key=value"),
        ("twx:coin?num$=2", "'num$'", "letters"),
        ("sciworld:chess", "'chess'", "boil"),
        ("sciworld:boil?speed=1", "'speed'", "teleportAction"),
        ("sciworld:boil?openDoors=maybe", "openDoors='maybe'", "true/false"),
        ("tw:zork", "'zork'", "tw-coin_collector"),
        ("tw:custom?seed=4", "'seed'", "reset(seed, fold)"),
        ("tw:custom?output=/tmp/x", "'output'", "cache dir"),
    ],
)
def test_bad_specs_name_the_problem(spec: str, must_name: str, must_list: str) -> None:
    with pytest.raises(EnvSpecError) as info:
        parse_spec(spec)
    message = str(info.value)
    assert must_name in message
    assert must_list in message
    assert isinstance(info.value, ValueError)


@pytest.mark.skipif(not textworld_available(), reason="textworld not installed")
@pytest.mark.parametrize(
    ("spec", "must_name", "must_list"),
    [
        ("tw:custom?world_sz=3", "'world_sz'", "world_size"),
        ("tw:tw-coin_collector", "--level", "level"),
        ("tw:tw-coin_collector?level=high", "'high'", "level"),
        ("tw:tw-cooking?go=5", "--go", "choose from 1, 6, 9, 12"),
        ("tw:tw-cooking?open=maybe", "open='maybe'", "1/0"),
        ("tw:tw-simple?rewards=dense", "--goal", "rewards"),
    ],
)
def test_bad_textworld_options_checked_by_tw_make_parser(spec: str, must_name: str, must_list: str) -> None:
    with pytest.raises(EnvSpecError) as info:
        parse_spec(spec)
    assert must_name in str(info.value)
    assert must_list in str(info.value)


@pytest.mark.skipif(not textworld_available(), reason="textworld not installed")
def test_textworld_specs() -> None:
    assert parse_spec("tw:coin_collector?level=5").canonical() == "tw:tw-coin_collector?level=5"
    assert parse_spec("textworld:custom?world-size=3,nb_objects=5").params == {"world_size": "3", "nb_objects": "5"}
    cooking = parse_spec("tw:cooking?recipe=1,take=1,go=1,open=1,cook=0,cut=1,split=valid")
    assert cooking.name == "tw-cooking"
    assert cooking.params["open"] == "1"


def test_make_env_rejects_bad_spec_before_starting_anything() -> None:
    with pytest.raises(EnvSpecError, match="'chess'"):
        make_env("twx:chess")


def test_list_environments_covers_every_scheme() -> None:
    infos = list_environments()
    twx = {i.name for i in infos if i.scheme == "twx"}
    assert twx == set(TWX_GAMES)
    assert {"custom", "tw-coin_collector", "tw-cooking", "tw-treasure_hunter"} <= {
        i.name for i in infos if i.scheme == "tw"
    }
    sw = [i for i in infos if i.scheme == "sciworld"]
    if sw:
        assert len(sw) == 30 and "boil" in {i.name for i in sw}
    for info in infos:
        name = parse_spec(info.example, validate=False).name
        assert name == info.name or (info.scheme == "tools" and name.endswith("/tasks.jsonl"))  # a file's path
    assert "twx:coin" in describe_environments()


@pytest.mark.parametrize(
    ("action", "template"),
    [
        ("take red apple", "take X"),
        ("put red apple in fridge", "put X in Y"),
        ("cook chicken wing in toaster", "cook X in Y"),
        ("put 10l of cedar in box", "put X in Y"),
        ("take 11 tangerines", "take X"),
        ("take coin from chest", "take X from Y"),
        ("open fridge", "open X"),
        ("Open  Fridge ", "open X"),
        ("move north", "move north"),
        ("go east", "go east"),
        ("open door to west", "open door to west"),
        ("close door to south", "close door to south"),
        ("look around", "look around"),
        ("inventory", "inventory"),
        ("prepare meal", "prepare meal"),
        ("jump up and down", "jump up and down"),
        ("pick up thermometer", "pick up X"),
        ("focus on baby brown bear", "focus on X"),
        ("read math problem", "read X"),
    ],
)
def test_heuristic_template(action: str, template: str) -> None:
    assert heuristic_template(action) == template
    assert heuristic_template(action) == heuristic_template(action)


def test_template_matcher_prefers_most_specific_template() -> None:
    match = TemplateMatcher(["take {o}", "take {o} from {c}", "take {o} from {s}", "go east"], r"\{[^}]*\}")
    assert match("take coin from chest") == "take X from Y"
    assert match("take coin") == "take X"
    assert match("go east") == "go east"
    assert match("dance wildly") == "dance X"  # falls back to the heuristic
    assert match.templates == ["go east", "take X", "take X from Y"]
    sw = TemplateMatcher(["go OBJ", "go to OBJ", "move OBJ to OBJ"], r"\bOBJ\b")
    assert sw("go to kitchen") == "go to X"
    assert sw("move egg in inventory to red box") == "move X to Y"
