"""The scheme registry: built-ins without metadata, plug-ins by entry point, one line for what is wrong."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint

import pytest

from evoskill.envs import EnvSpecError, list_environments, make_env, parse_spec
from evoskill.envs import registry as reg
from tests.unit.conftest import EXAMPLE_ENV as EXAMPLE
from tests.unit.conftest import env_entry_point as point

ROOT = EXAMPLE.parents[1]


def test_pyproject_declares_the_builtins_the_fallback_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"][reg.ENTRY_POINT_GROUP] == reg.BUILTIN_ENTRY_POINTS
    example = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    assert example["entry-points"][reg.ENTRY_POINT_GROUP] == {"puzzle": "evoskill_env_example:scheme"}


def test_builtins_work_when_the_metadata_declares_nothing(env_entry_points: list[EntryPoint]) -> None:
    assert reg.scheme_registry().names() == ["twx", "tw", "sciworld", "tools", "bfcl"]
    assert parse_spec("textworld-express:coin").canonical() == "twx:coin"
    assert {i.scheme for i in list_environments()} >= {"twx", "tw"}


def test_a_declared_scheme_is_parsed_listed_and_played(env_entry_points: list[EntryPoint]) -> None:
    env_entry_points.append(point("puzzle", "evoskill_env_example:scheme"))
    assert reg.scheme_registry().names() == ["twx", "tw", "sciworld", "tools", "bfcl", "puzzle"]
    spec = parse_spec("puzzle:Tower-of-Hanoi?disks=2")
    assert spec.canonical() == "puzzle:hanoi?disks=2,start=random"
    assert "puzzle:hanoi?disks=3" in [i.example for i in list_environments()]
    with make_env(spec, max_steps=20) as env:
        env.reset(0, "train")
        gold = env.gold_path()
        assert gold
        for action in gold:
            obs, _ = env.step(action)
        assert obs.won and obs.score == 1.0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("puzzle:sudoku", "puzzle:sudoku: unknown puzzle 'sudoku'; accepted: hanoi"),
        ("puzzle:hanoi?disks=9", "disks='9' must be an integer from 1 to 8"),
        ("puzzle:hanoi?pegs=4", "unknown parameter 'pegs'; accepted parameters: disks, start"),
        ("gym:CartPole", "unknown environment scheme 'gym'; accepted schemes: twx, tw, sciworld, tools, bfcl, puzzle"),
    ],
)
def test_a_bad_spec_is_one_line_naming_it(env_entry_points: list[EntryPoint], spec: str, message: str) -> None:
    env_entry_points.append(point("puzzle", "evoskill_env_example:scheme"))
    with pytest.raises(EnvSpecError) as info:
        parse_spec(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_broken_plugin_fails_only_its_own_specs(env_entry_points: list[EntryPoint]) -> None:
    env_entry_points += [point("broken", "no_such_package:scheme"), point("notascheme", "os.path:join")]
    assert parse_spec("twx:coin").scheme == "twx"
    with pytest.raises(EnvSpecError, match=r"'broken' .* could not be loaded: ModuleNotFoundError"):
        parse_spec("broken:game")
    with pytest.raises(EnvSpecError, match="is a function, not an EnvScheme"):
        parse_spec("notascheme:game")


def test_the_first_declaration_of_a_name_wins(env_entry_points: list[EntryPoint]) -> None:
    env_entry_points += [point("twx", "evoskill_env_example:scheme"), point("puzzle", "evoskill_env_example:scheme"),
                 point("puzzle", "no_such_package:scheme")]
    assert parse_spec("twx:hanoi").canonical() == "twx:hanoi?disks=3,start=random"  # metadata over fallback
    assert parse_spec("puzzle:hanoi").scheme == "puzzle"


def test_a_scheme_search_settings_apply_where_the_operator_set_none(env_entry_points: list[EntryPoint]) -> None:
    from evoskill.core.search_config import SearchConfig

    service = SearchConfig()
    playing = reg.search_settings("sw:boil?easy=1", service)  # ScienceWorld: no child stepped ahead, 5 s a step
    assert (playing.prefetch_children, playing.time_budget_s) == (0, 5.0)
    assert reg.search_settings("twx:coin", service) == service  # declares none
    chosen = SearchConfig(prefetch_children=8)  # as EVOSKILL_SEARCH__PREFETCH_CHILDREN=8 sets it
    assert reg.search_settings("sciworld:boil", chosen).prefetch_children == 8
    assert reg.search_settings("nosuch:game", service) == service  # the environment says why when it starts
