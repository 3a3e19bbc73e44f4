"""ScienceWorld adapter on the real simulator: one JVM for the module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

pytest.importorskip("scienceworld")

from evoskill.envs import InvalidActionError, make_env, parse_spec
from evoskill.envs.scienceworld_env import ScienceWorldAdapter

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")

TASK = "sciworld:lifespan-longest-lived"  # gold paths of 2-6 steps


@pytest.fixture(scope="module")
def env() -> Iterator[ScienceWorldAdapter]:
    e = make_env(TASK)
    assert isinstance(e, ScienceWorldAdapter)
    yield e
    e.close()


def play_gold(env: ScienceWorldAdapter) -> None:
    for action in env.gold_path() or []:
        if env.done:
            break
        env.step(action)


def test_reset_gives_goal_and_valid_actions_and_gold_path_wins(env: ScienceWorldAdapter) -> None:
    obs = env.reset(seed=0, fold="test")
    assert env.variation in env.variations("test")
    assert "longest life span" in obs.goal and not obs.goal.startswith("Task Description")
    assert len(obs.valid_actions) > 50 and "look around" in obs.valid_actions
    assert obs.text.startswith("This room is called") and obs.inventory and obs.look
    assert (obs.score, obs.done, obs.moves) == (0.0, False, 0)
    gold = env.gold_path()
    assert gold and any(a.startswith("focus on") for a in gold)
    rewards = []
    for action in gold:
        if env.done:
            break
        rewards.append(env.step(action)[1])
    # ScienceWorld's gold paths reach the full score (100 -> 1.0); trailing "wait1" may be left over.
    assert env.won and env.done and env.score == 1.0
    assert sum(rewards) == pytest.approx(1.0) and all(r >= 0 for r in rewards)
    # The gold path came from the gold JVM: the one that plays never generated one (its resets would stay slow).
    assert env._env.goldPathGenerated is False and env._gold_env.goldPathGenerated is True


def test_invalid_and_ambiguous_actions_raise_without_changing_state(env: ScienceWorldAdapter) -> None:
    env.reset(seed=0, fold="train")
    before = env.observation()
    with pytest.raises(InvalidActionError, match=r"'fly to the moon'.*parser"):
        env.step("fly to the moon")
    with pytest.raises(InvalidActionError, match="ambiguous") as info:
        env.step("open door")
    assert info.value.action == "open door"
    assert env.observation() == before and env.moves == 0
    assert "reset task" not in before.valid_actions  # the runner's to do, not an agent's
    for strict in (True, False):
        env.strict = strict
        with pytest.raises(InvalidActionError, match="runner resets"):
            env.step("reset task")
    env.strict = True
    assert env.observation() == before and env.moves == 0
    # Gold paths use forms outside the valid list (aliases, qualified names): the parser takes them.
    obs, _ = env.step("examine picture")
    assert "picture" in obs.text and env.moves == 1
    env.strict = False
    try:
        obs, reward = env.step("fly to the moon")
        assert "No known action" in obs.text and reward == 0.0
    finally:
        env.strict = True


def test_a_request_whose_readings_all_say_the_same_takes_the_first() -> None:
    """grow-plant's gold path moves one of three identical seeds ("move apple seed in seed jar to flower pot 2",
    then "0" for ScienceWorld's question): the adapter answers the question, and the gold path leaves it out."""
    env = make_env("sciworld:grow-plant?easy=1")
    assert isinstance(env, ScienceWorldAdapter)
    try:
        env.reset(seed=0, fold="train")
        gold = env.gold_path() or []
        assert gold and not any(a.strip().isdigit() for a in gold)
        move = next(a for a in gold if a.startswith("move apple seed"))
        for action in gold[: gold.index(move)]:
            env.step(action)
        assert move not in env.observation().valid_actions
        obs, _ = env.step(move)
        assert "apple seed" in obs.text and "Ambiguous" not in obs.text
        env.restore(env.snapshot())  # a replay answers the question as the step did
        focus = gold[gold.index(move) + 1]
        assert focus.startswith("focus on apple seed") and "You focus" in env.step(focus)[0].text
    finally:
        env.close()


def test_shown_names_list_each_object_as_the_room_shows_it_and_act_on_it() -> None:
    """identify-life-stages-1 lists a dove egg as "dove" and a frog egg as "common toad"; with `shown_names` they are
    listed as the room reads ("a dove egg"), and the renamed focus is the one that scores. The option is evoskill's,
    not a simplification ScienceWorld is loaded with."""
    env = make_env("sciworld:identify-life-stages-1?easy=1,shown_names=1")
    assert isinstance(env, ScienceWorldAdapter)
    try:
        assert env.shown_names and env.simplifications == "easy"
        obs = env.reset(seed=1, fold="test")
        assert "life stages of the dove" in obs.goal
        for action in ("go to hallway", "go to kitchen", "go to outside"):
            obs, _ = env.step(action)
        assert "a dove egg" in obs.look and "focus on dove egg" in obs.valid_actions
        assert "focus on frog egg" in obs.valid_actions and "focus on common toad" not in obs.valid_actions
        before = obs.score
        obs, reward = env.step("focus on dove egg")
        assert "You focus on the dove egg" in obs.text and reward > 0 and obs.score > before and not obs.done
    finally:
        env.close()


def test_folds_give_different_variations(env: ScienceWorldAdapter) -> None:
    folds = {f: env.variations(f) for f in ("train", "dev", "test")}
    assert not set(folds["train"]) & set(folds["dev"]) and not set(folds["dev"]) & set(folds["test"])
    seen = {}
    for fold in ("train", "dev"):
        obs = env.reset(seed=0, fold=fold)
        seen[fold] = (env.variation, obs.text)
    assert seen["train"] != seen["dev"]
    assert env.reset(seed=0, fold="dev").text == seen["dev"][1]


def test_templates_come_from_scienceworld(env: ScienceWorldAdapter) -> None:
    env.reset(seed=0, fold="train")
    assert env.template("focus on baby brown bear") == "focus on X"
    assert env.template("move egg dove egg in inventory to blue box") == "move X to Y"
    assert env.template("go to kitchen") == "go to X"
    assert env.template("pick up thermometer") == "pick up X"
    assert env.template("look around") == "look around"
    templates = {env.template(a) for a in env.valid_actions()}
    assert {"open X", "connect X to Y", "look at X"} <= templates
    assert templates <= set(env.templates)
    assert {env.template(a) for a in env.valid_actions()} == templates


def test_snapshot_restore_by_replay_and_task_switch(env: ScienceWorldAdapter) -> None:
    assert not env.native_copy
    env.reset(seed=1, fold="train")
    gold = env.gold_path() or []
    env.step(gold[0])
    snap = env.snapshot()
    before = env.observation()
    env.step(gold[1])
    assert env.restore(snap) == before and env.actions == [gold[0]]
    play_gold(env)
    assert env.won
    env.load(parse_spec("sciworld:2-1"))  # use-thermometer, by task id
    obs = env.reset(seed=0)
    assert env.spec.name == "use-thermometer" and "thermometer" in obs.goal
    env.load(parse_spec(TASK))


def test_a_replay_resets_without_loading_again_and_reaches_the_same_state(env: ScienceWorldAdapter) -> None:
    env.reset(seed=1, fold="train")
    gold = env.gold_path() or []
    env.step(gold[0])
    snap = env.snapshot()
    played, _ = env.step(gold[1])
    loads: list[tuple[object, ...]] = []
    load = env._env.load
    env._env.load = lambda *args, **kwargs: (loads.append(args), load(*args, **kwargs))
    try:
        env.restore(snap)
        replayed, _ = env.step(gold[1])
    finally:
        env._env.load = load
    assert not loads and replayed == played


def test_every_build_of_a_variation_names_its_objects_alike(env: ScienceWorldAdapter) -> None:
    """A replay rebuilds the world, so a name the planner read must mean the same object there: resets, a fresh
    load and another JVM all list one variation's actions alike (seed 6 of lifespan-longest-lived's test fold has
    three paints in cups, which ScienceWorld names by random draws)."""
    listings = []
    for fresh_load in (False, False, True):
        if fresh_load:
            env._loaded = None
        env.reset(seed=6, fold="test")
        listings.append(env.valid_actions())
    env.step("look around")
    env.step("look around")
    assert listings[0] == listings[1] == listings[2] == env.valid_actions()
    with make_env(TASK) as other:
        assert other.reset(seed=6, fold="test").valid_actions == listings[0]


def test_a_listing_draws_none_of_the_simulations_random_numbers(env: ScienceWorldAdapter) -> None:
    """Animals wander and genes mix by the random numbers a listing would draw, and a replay lists nothing."""
    env.reset(seed=6, fold="test")
    draws = env._fixed_draws
    before = int(draws._state.get(draws._random))
    env._info()
    assert int(draws._state.get(draws._random)) == before
    env._env.server.getValidActionObjectCombinations()  # ScienceWorld's own listing draws (three paints in cups)
    assert int(draws._state.get(draws._random)) != before


def test_a_replay_lists_no_valid_actions_it_would_not_read(env: ScienceWorldAdapter) -> None:
    """Listing the valid actions costs several steps' time; a restore reads only the snapshot's observation."""
    env.reset(seed=1, fold="train")
    for action in (env.gold_path() or [])[:2]:
        env.step(action)
    snap, before = env.snapshot(), env.observation()
    listings: list[int] = []
    listing = env._info
    env._info = lambda: (listings.append(1), listing())[1]  # type: ignore[method-assign]
    try:
        restored = env.restore(snap)
        after, _ = env.step("look around")
    finally:
        del env._info
    assert restored == before and len(listings) == 1  # the step after the restore lists; the replay did not
    assert after.valid_actions


def test_both_replay_modes_of_the_replay_bench_reach_the_recorded_state() -> None:
    from evoskill.bench.replay import gold_prefix, time_restores

    actions = gold_prefix(TASK, 0, 2)
    seconds = time_restores(TASK, 0, actions, repeats=1)  # raises where a mode reaches another state
    assert actions and {m: len(s) for m, s in seconds.items()} == {"quiet": 2, "full": 2}


@pytest.mark.slow
def test_boil_gold_path_reaches_full_score() -> None:
    with make_env("sciworld:boil") as e:
        e.reset(seed=0, fold="train")
        play_gold(e)  # type: ignore[arg-type]
        assert e.won and e.score == 1.0
