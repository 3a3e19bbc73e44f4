"""The offline library's generation (gold paths from real TextWorldExpress games, worker processes) and its JSONL
form: what θ reads survives the round trip, and a bad line is named by its number and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evoskill.cli import app
from evoskill.core.learn.data import Example, episode_examples
from evoskill.envs import make_env
from evoskill.events.v1 import events_pb2
from evoskill.library.generate import Throughput, generate, unlisted_steps
from evoskill.library.jsonl import LibraryFormatError, parse_line, read_jsonl, to_record, write_jsonl

COOKING = ("twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,"
           "limitInventorySize=0")


@pytest.fixture(scope="module")
def demos() -> tuple[list[events_pb2.EpisodeCompleted], Throughput]:
    tally = Throughput()
    return list(generate(COOKING, "train", range(3, 7), workers=2, throughput=tally)), tally


def same_view(a: Example, b: Example) -> bool:
    """θ reads the same state, candidates, marks and targets."""
    fields = ("goal", "observation", "actions", "templates", "taken", "seen", "skills", "ret")
    return all(getattr(a, f) == getattr(b, f) for f in fields) and np.array_equal(a.visit_probs, b.visit_probs)


def test_gold_paths_are_won_in_seed_order_with_every_candidate_marked(demos) -> None:  # type: ignore[no-untyped-def]
    episodes, tally = demos
    assert [e.seed for e in episodes] == [3, 4, 5, 6]
    assert tally.episodes == 4 and tally.won == 4 and tally.steps == sum(len(e.steps) for e in episodes)
    assert tally.unlisted == 0  # TextWorldExpress lists every action its gold paths take
    assert tally.env_steps > tally.steps  # the children stepped for the seen marks
    env = make_env(COOKING)
    try:
        env.reset(3, "train")
        gold = env.gold_path()
    finally:
        env.close()
    first = episodes[0]
    assert first.agent == "demo" and first.fold == "train" and first.won and first.episode_id.startswith("demo:")
    assert [s.action.text for s in first.steps] == gold
    for step in first.steps:
        target = step.target
        assert target.actions and len(target.templates) == len(target.seen) == len(target.actions)
    # "look around" changes nothing: the marks say it leads back (where the children were stepped).
    looks = [dict(zip(s.target.actions, s.target.seen, strict=True)).get("look around") for s in first.steps
             if len(s.target.actions) <= 32]
    assert looks and all(looks)
    unmarked = next(generate(COOKING, "train", range(3, 4), seen=False))
    assert not any(m for s in unmarked.steps for m in s.target.seen)
    assert [s.action.text for s in unmarked.steps] == gold


def test_the_jsonl_round_trip_keeps_what_theta_reads(demos, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    episodes, _ = demos
    path = tmp_path / "library.jsonl"
    with path.open("w") as out:
        assert write_jsonl(episodes, out) == 4
    back = list(read_jsonl(path))
    assert [e.episode_id for e in back] == [e.episode_id for e in episodes]
    for original, loaded in zip(episodes, back, strict=True):
        assert (loaded.won, loaded.score, loaded.seed, loaded.env_spec) == (original.won, original.score,
                                                                            original.seed, original.env_spec)
        a, b = episode_examples(original), episode_examples(loaded)
        assert len(a) == len(b) and all(same_view(x, y) for x, y in zip(a, b, strict=True))
        assert to_record(loaded) == to_record(original)  # record -> proto -> record is exact


def test_a_logged_trajectory_without_ids_templates_or_marks_loads(tmp_path: Path) -> None:
    line = json.dumps({"env": "twx:coin", "seed": 4, "fold": "train", "goal": "find the coin", "won": True,
                       "score": 1.0, "steps": [
                           {"observation": "You are in the kitchen.", "valid_actions": ["move east", "take coin"],
                            "action": "take coin", "reward": 1.0, "score": 1.0, "done": True}]})
    episode = parse_line(line, "log line 1")
    assert episode.episode_id.startswith("import:") and parse_line(line, "again").episode_id == episode.episode_id
    (example,) = episode_examples(episode)
    assert example.actions == ("move east", "take coin") and example.taken == 1 and example.goal == "find the coin"
    assert example.seen == () and example.templates == ("move east", "take X")


@pytest.mark.parametrize(("change", "named"), [
    (lambda d: d["steps"][1].update(seen=d["steps"][1]["seen"][:-1]), "line 2: steps[1]: Value error, seen has"),
    (lambda d: d.update(seed="3"), "line 2: seed: Input should be a valid integer"),
    (lambda d: d["steps"][0].update(reward=float("nan")), "line 2: steps[0].reward: Input should be a finite number"),
    (lambda d: d.update(fold="valid"), "line 2: fold: Input should be 'train', 'dev' or 'test'"),
    (lambda d: d["steps"][2].pop("action"), "line 2: steps[2].action: Field required"),
    (lambda d: d.update(colour="red"), "line 2: colour: Extra inputs are not permitted"),
    (lambda d: d.update(steps=[]), "line 2: steps: List should have at least 1 item"),
])
def test_a_bad_line_is_named_by_its_number_and_field(demos, tmp_path: Path, change, named) -> None:  # type: ignore[no-untyped-def]
    episodes, _ = demos
    good = to_record(episodes[0])
    bad = json.loads(json.dumps(good))
    change(bad)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(LibraryFormatError, match=named.replace("[", r"\[").replace("]", r"\]")):
        list(read_jsonl(path))


def test_library_import_refuses_a_bad_file_before_reaching_any_service(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"env": "twx:coin"}\n\n{not json\n')
    result = CliRunner().invoke(app, ["library", "import", str(path)])
    assert result.exit_code == 2
    assert f"{path} line 1: seed: Field required" in " ".join(result.output.split())


def test_a_gold_action_that_is_not_valid_is_passed_over_and_the_game_still_won() -> None:
    # TextWorldExpress's default CookingWorld, train seed 69: its gold path opens the kitchen cupboard twice.
    env = make_env("twx:cookingworld")
    obs = env.reset(69, "train")
    gold, invalid = env.gold_path(), 0
    for action in gold:
        if action not in obs.valid_actions:
            invalid += 1
            continue
        obs, _ = env.step(action)
    assert invalid, "the environment's gold path changed: pick another seed"
    episode = next(generate("twx:cookingworld", "train", range(69, 70), seen=False))
    assert episode.won and len(episode.steps) == len(gold) - invalid


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
def test_scienceworld_gold_actions_outside_the_valid_list_are_played() -> None:
    # ScienceWorld's parser accepts gold actions its valid-action list does not name ("open door to kitchen").
    tally = Throughput()
    episode = next(generate("sciworld:boil?easy=1", "train", range(0, 1), seen=False, throughput=tally))
    assert episode.won
    # ... and counted: no agent is ever offered them as candidates
    assert tally.unlisted == unlisted_steps(episode) > 0
    assert episode.steps[0].action.text not in episode.steps[0].target.actions  # "open door to kitchen"
    # ... and one its list names in a shorter form is recorded in that form when it does the same: θ is only
    # ever offered the listed actions ("focus on thermometer in inventory" -> "focus on thermometer").
    episode = next(generate("sciworld:measure-melting-point-known-substance?easy=1", "train", range(0, 1),
                            seen=False))
    actions = [step.action.text for step in episode.steps]
    assert episode.won and "focus on thermometer" in actions, actions
    assert "focus on thermometer in inventory" not in actions
    # with a qualifier left out, or a verb's alias: "use thermometer in inventory on chocolate", "examine chocolate"
    assert {"use thermometer on chocolate", "look at chocolate"} <= set(actions), actions
    assert not any(a.startswith(("use thermometer in inventory", "examine")) for a in actions), actions


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
def test_shortening_leaves_out_a_look_around_and_keeps_what_changes_or_tells() -> None:
    from contextlib import closing

    from evoskill.core.shorten import shortened
    from evoskill.envs import make_env
    from evoskill.library.generate import GoldTrials

    spec = "sciworld:lifespan-longest-lived?easy=1"
    with closing(make_env(spec)) as env:
        env.reset(seed=0, fold="train")
        gold = env.gold_path() or []
        env.want_gold_path = False
        trials = GoldTrials(env, 0, "train")
        padded = [gold[0], "look around", *gold[1:]]
        assert trials.idle(padded, 1)  # its text is the room the observation carries
        assert not trials.idle(padded, 0) and not trials.idle(padded, len(padded) - 1)  # opens a door; the focus
        assert shortened(padded, trials.outcome, trials.listed, trials.idle) == gold
        assert trials.env_steps >= len(padded)  # every trial step is counted
    # the demonstrations' own path: nothing idle in it, played as it is; the trials' steps are counted
    tally = Throughput()
    episode = next(generate(spec, "train", range(0, 1), seen=False, shorten=True, throughput=tally))
    played = [step.action.text for step in episode.steps]
    assert episode.won and played == gold[: len(played)]  # a trailing "wait1" after the win is never played
    assert tally.env_steps > len(played) * len(played)  # a replay of the path at least per step judged


def test_listed_forms_are_word_prefixes_either_way() -> None:
    from evoskill.core.agent import listed_forms

    listed = ["focus on thermometer", "focus on thermometers", "focus on red box", "open door"]
    assert listed_forms("focus on thermometer in inventory", listed) == ["focus on thermometer"]
    assert listed_forms("open", listed) == ["open door"]
    assert listed_forms("focus on thermometer", listed) == []  # listed already


def test_listed_forms_leave_qualifiers_out_and_read_verb_aliases() -> None:
    from evoskill.core.agent import listed_forms

    listed = ["use thermometer on chocolate", "use chocolate on thermometer", "use thermometer on metal pot",
              "look at metal pot", "look at substance in metal pot", "look at substance"]
    assert listed_forms("use thermometer in inventory on chocolate", listed) == ["use thermometer on chocolate"]
    # the closest first; the environment's probe decides which does the same
    assert listed_forms("examine substance in metal pot", listed) == ["look at substance in metal pot",
                                                                      "look at metal pot", "look at substance"]
    assert listed_forms("use thermometer in inventory on stove", listed) == []
    assert listed_forms("drop black wire", ["put down black wire", "put down orange"]) == ["put down black wire"]
    # the same words in another order, and a last qualifier of place left out
    wires = ["connect anode in solar panel to black wire terminal 1", "connect anode in generator to black wire "
             "terminal 1", "connect black wire terminal 1 to anode in solar panel"]
    assert listed_forms("connect solar panel anode to black wire terminal 1", wires) == [wires[0]]
    seeds = ["move apple seed in the seed stage on seed jar to flower pot 3", "move apple seed in the seed stage on "
             "seed jar to flower pot 1", "move flower pot 3 to apple seed in the seed stage on seed jar"]
    assert listed_forms("move apple seed in seed jar to flower pot 3", seeds) == [seeds[0]]  # qualifiers between
    animals = ["focus on turtle", "focus on hatchling turtle", "focus on beaver"]
    assert listed_forms("focus on hatchling turtle in outside", animals) == ["focus on hatchling turtle",
                                                                            "focus on turtle"]
    # the last object's words in another order (objects listed as the room shows them), not the objects swapped
    shown = ["focus on crocodile egg", "focus on frog egg", "move crocodile egg to pond", "move pond to crocodile egg"]
    assert listed_forms("focus on egg crocodile in outside", shown) == ["focus on crocodile egg"]
    assert listed_forms("move egg crocodile to pond", shown) == ["move crocodile egg to pond"]

