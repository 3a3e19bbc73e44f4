"""TextWorldExpress adapter on the real simulator: one JVM for the module, games switched by load()."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from evoskill.core.errors import InvalidInput
from evoskill.envs import EnvSpecError, EnvStateError, InvalidActionError, make_env, parse_spec
from evoskill.envs.base import heuristic_template
from evoskill.envs.jvm import java_process
from evoskill.envs.spec import TWX_GAMES
from evoskill.envs.twx import TextWorldExpressAdapter

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")

COOKING = "twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,limitInventorySize=0"


@pytest.fixture(scope="module")
def env() -> Iterator[TextWorldExpressAdapter]:
    e = make_env("twx:coin")
    assert isinstance(e, TextWorldExpressAdapter)
    yield e
    e.close()


@pytest.fixture(autouse=True)
def _defaults(env: TextWorldExpressAdapter) -> None:
    env.strict, env.max_steps = True, None


def play_gold(env: TextWorldExpressAdapter) -> float:
    total = 0.0
    for action in env.gold_path() or []:
        assert action in env.valid_actions(), action
        _, reward = env.step(action)
        total += reward
        if env.done:
            break
    return total


def test_coin_reset_goal_valid_actions_and_gold_path_wins(env: TextWorldExpressAdapter) -> None:
    env.load(parse_spec("twx:coin"))
    obs = env.reset(seed=3, fold="train")
    assert "coin" in obs.goal and obs.goal == env.goal
    assert obs.valid_actions and list(obs.valid_actions) == sorted(obs.valid_actions)
    assert obs.text and obs.look and obs.inventory
    assert (obs.score, obs.done, obs.won, obs.moves) == (0.0, False, False, 0)
    gold = env.gold_path()
    assert gold and gold[-1] == "take coin"
    total = play_gold(env)
    assert env.won and env.done and not env.lost
    assert env.score == 1.0 and total == pytest.approx(1.0)
    assert env.moves == len(env.actions) <= len(gold)
    with pytest.raises(EnvStateError, match="won"):
        env.step("look around")


def test_cookingworld_with_params_gold_path_wins_and_templates(env: TextWorldExpressAdapter) -> None:
    env.load(parse_spec(COOKING))
    assert env.spec.params["numIngredients"] == "2"
    env.reset(seed=0, fold="train")
    assert "meal" in env.goal
    gold = env.gold_path() or []
    templates = [env.template(a) for a in gold]
    assert "take X" in templates and "eat X" in templates
    assert any(t in {"cook X in Y", "slice X", "dice X", "chop X"} for t in templates)
    assert templates == [env.template(a) for a in gold]  # stable
    assert all(env.template(a) == heuristic_template(a) for a in env.valid_actions())
    play_gold(env)
    assert env.won and env.score == 1.0


@pytest.mark.parametrize("game", sorted(set(TWX_GAMES) - {"coin", "cookingworld"}))
def test_every_other_game_gold_path_wins(env: TextWorldExpressAdapter, game: str) -> None:
    env.load(parse_spec(f"twx:{game}"))
    env.reset(seed=1, fold="dev")
    assert env.goal and env.valid_actions()
    play_gold(env)
    assert env.won, (game, env.actions, env.observation().text)


def test_invalid_action_raises_and_pass_through_reaches_the_env(env: TextWorldExpressAdapter) -> None:
    env.load(parse_spec("twx:coin"))
    env.reset(seed=0)
    with pytest.raises(InvalidActionError) as info:
        env.step("fly to the moon")
    assert info.value.action == "fly to the moon"
    assert "'fly to the moon'" in str(info.value)
    assert info.value.valid_actions == env.valid_actions()
    assert env.moves == 0
    env.strict = False
    obs, reward = env.step("fly to the moon")
    assert "not sure" in obs.text.lower() or "unknown" in obs.text.lower()
    assert reward == 0.0 and env.moves == 1


def test_folds_give_different_games_for_the_same_seed(env: TextWorldExpressAdapter) -> None:
    env.load(parse_spec("twx:cookingworld"))
    assert env.game_seed(5, "train") == 5
    assert len({env.game_seed(5, f) for f in ("train", "dev", "test")}) == 3
    games = set()
    for fold in ("train", "dev", "test"):
        obs = env.reset(seed=5, fold=fold)
        games.add((obs.text, tuple(obs.valid_actions)))
    assert len(games) == 3
    first = env.reset(seed=5, fold="dev")
    assert env.reset(seed=5, fold="dev").text == first.text  # deterministic


def test_snapshot_restore_replays_prefix(env: TextWorldExpressAdapter) -> None:
    env.load(parse_spec("twx:coin"))
    assert not env.native_copy
    env.reset(seed=2)
    env.step(env.valid_actions()[0])
    snap = env.snapshot()
    before = env.observation()
    for _ in range(3):
        env.step(env.valid_actions()[-1])
    restored = env.restore(snap)
    assert restored == before
    assert env.actions == list(snap.actions) and env.moves == 1
    assert env.valid_actions() == list(before.valid_actions)
    with pytest.raises(NotImplementedError):
        env.copy()


def test_max_steps_truncates(env: TextWorldExpressAdapter) -> None:
    env.load(parse_spec("twx:coin"))
    env.max_steps = 2
    env.reset(seed=0)
    env.step("look around")
    obs, _ = env.step("inventory")
    assert obs.done and not obs.won and not obs.lost
    with pytest.raises(EnvStateError, match="step limit"):
        env.step("look around")


def test_bad_params_at_load_keep_the_env_usable(env: TextWorldExpressAdapter) -> None:
    with pytest.raises(EnvSpecError, match="less than or equal to 11"):
        env.load(parse_spec("twx:coin?numLocations=100"))
    with pytest.raises(EnvSpecError, match="sciworld"):
        env.load(parse_spec("sciworld:boil"))
    assert env.spec.canonical() == "twx:coin"
    assert env.reset(seed=0).valid_actions


def test_reset_validates_fold_and_step_needs_reset() -> None:
    e = TextWorldExpressAdapter(parse_spec("twx:simonsays"))
    proc = java_process(e._env)
    try:
        with pytest.raises(EnvStateError, match="reset"):
            e.step("look around")
        with pytest.raises(InvalidInput, match="fold"):
            e.reset(0, "validation")
    finally:
        e.close()
    assert proc is not None and proc.poll() is not None  # the JVM is gone
    with pytest.raises(EnvStateError, match="closed"):
        e.reset(0)
