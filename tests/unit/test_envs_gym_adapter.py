"""GymTextEnv on the example's Tower of Hanoi (a real game) and on an env that gives only the bare API."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from evoskill.envs import EnvScheme, EnvSpec, GymTextEnv, InvalidActionError, Observation
from tests.unit.conftest import env_entry_point


@pytest.fixture(autouse=True)
def schemes(env_entry_points: list[EntryPoint]) -> None:
    env_entry_points += [env_entry_point("puzzle", "evoskill_env_example:scheme"),
                         env_entry_point("count", f"{__name__}:COUNT")]


def hanoi(spec: EnvSpec) -> Any:
    from evoskill_env_example.hanoi import TowerOfHanoi

    return TowerOfHanoi(disks=int(spec.params["disks"]), start=spec.params["start"])


def spec(disks: int = 3, start: str = "random") -> EnvSpec:
    return EnvSpec("puzzle", "hanoi", {"disks": str(disks), "start": start})


def make(**options: Any) -> GymTextEnv:
    return GymTextEnv(spec(**options.pop("game", {})), hanoi, **options)


def test_the_gold_path_wins_with_the_score_as_progress() -> None:
    env = make()
    obs = env.reset(3, "train")
    start = obs.score
    assert obs.valid_actions and obs.goal.startswith("Move all 3 disks") and not obs.done
    gold = env.gold_path()
    assert gold is not None
    total = 0.0
    for action in gold:
        assert action in env.valid_actions()
        obs, reward = env.step(action)
        total += reward
    assert obs.won and obs.done and not obs.lost and obs.score == 1.0
    assert total == pytest.approx(1.0 - start)  # rewards: the change of the normalised score
    assert env.template("move disk 1 from left to right") == "move X from Y"


def test_seeds_and_folds_pick_games_deterministically() -> None:
    env = make(game={"disks": 6})
    train = [env.reset(seed, "train").text for seed in range(5)]
    assert train == [env.reset(seed, "train").text for seed in range(5)]
    assert train != [env.reset(seed, "test").text for seed in range(5)]  # each fold its own games
    assert len(set(train)) > 1


def test_strict_mode_step_limit_and_replay() -> None:
    env = make(max_steps=3)
    env.reset(0, "dev")
    with pytest.raises(InvalidActionError, match="fly to the moon"):
        env.step("fly to the moon")
    first = env.valid_actions()[0]
    env.step(first)
    snap = env.snapshot()
    env.step(env.valid_actions()[0])
    obs, _ = env.step(env.valid_actions()[0])
    assert obs.done and not obs.won and not obs.lost  # truncated by max_steps
    assert env.restore(snap).text == Observation.FromString(snap.observation).text
    assert env.actions == [first] and not env.done


def test_load_switches_game_and_closes_the_old_one() -> None:
    env = make()
    env.reset(0, "train")
    env.load(spec(disks=5, start="classic"))
    obs = env.reset(0, "train")
    assert "left peg: 5 4 3 2 1" in obs.text and len(env.gold_path() or []) == 31


def test_a_spec_string_is_refused_with_what_to_pass() -> None:
    """An env takes a parsed spec: parsing a string needs the schemes, which the env's module must not import."""
    with pytest.raises(TypeError, match=r"GymTextEnv takes an EnvSpec, not str .*parse_spec\('puzzle:hanoi'\)"):
        GymTextEnv("puzzle:hanoi", hanoi)  # type: ignore[arg-type]
    env = make()
    with pytest.raises(TypeError, match=r"load\(\) takes an EnvSpec.*parse_spec"):
        env.load("puzzle:hanoi?disks=4")  # type: ignore[arg-type]
    assert env.spec == spec()


class Countdown:
    """The bare API: no info at all, valid actions by method, one reward at the end."""

    def __init__(self) -> None:
        self.left = 0
        self.closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self.left = 2 + (seed or 0) % 2
        return f"{self.left} to go", {}

    def valid_actions(self) -> list[str]:
        return ["count down", "wait"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.left -= action == "count down"
        return f"{self.left} to go", float(self.left == 0), self.left == 0, False, {}

    def close(self) -> None:
        self.closed = True


def test_bare_env_score_from_rewards_win_from_termination() -> None:
    env = GymTextEnv(EnvSpec("count", "down"), lambda _: Countdown())
    obs = env.reset(0, "train")
    assert obs.valid_actions == ["count down", "wait"] and env.gold_path() is None
    env.step("wait")
    env.step("count down")
    obs, reward = env.step("count down")
    assert (obs.won, obs.done, obs.score, reward) == (True, True, 1.0, 1.0)
    inner = env.env
    env.close()
    assert inner.closed


def test_an_env_without_valid_actions_is_named() -> None:
    class Mute(Countdown):
        valid_actions = None  # type: ignore[assignment]

    env = GymTextEnv(EnvSpec("count", "mute"), lambda _: Mute())
    with pytest.raises(TypeError, match=r"Mute gives no valid actions: return them as info\['valid_actions'\]"):
        env.reset(0, "train")


COUNT = EnvScheme.gym(lambda _: Countdown())
