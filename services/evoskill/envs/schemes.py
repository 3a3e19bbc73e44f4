"""The built-in schemes (``twx``, ``tw``, ``sciworld``), declared as ``evoskill.envs`` entry points like any
plug-in: their parsers, listings and ``make``.

Importing this module imports no environment package: each adapter is imported when a game starts, or when a
parser or listing needs its package (TextWorld's option checker, ScienceWorld's task table).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evoskill.envs.base import TextEnv
from evoskill.envs.jvm import java_available
from evoskill.envs.registry import EnvScheme, EnvUnavailableError
from evoskill.envs.spec import (
    FALSE_VALUES,
    SW_PARAMS,
    TW_ALIASES,
    TW_GENERATORS,
    TW_RESERVED_OPTIONS,
    TWX_ALIASES,
    TWX_DESCRIPTIONS,
    TWX_GAMES,
    EnvironmentInfo,
    EnvSpec,
    EnvSpecError,
    parse_bool,
)

_INT_RE = re.compile(r"-?\d{1,9}")  # fits the JVM's int
# The documented forms of tw-make's options: an integer, a 1/0 flag, one of its choices, or a theme's name.
_WORD_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _norm(name: str) -> str:
    return re.sub(r"[-_\s]", "", name.strip().lower())


def parse_twx(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    game = TWX_ALIASES.get(_norm(name))
    if game is None:
        raise EnvSpecError(
            f"unknown TextWorldExpress game {name!r}; accepted: {', '.join(TWX_GAMES)} "
            f"(aliases: coincollector, cooking, commonsense, simon, ...)"
        )
    if validate:
        known = TWX_GAMES[game]
        for key, value in params.items():
            if key not in known:
                accepted = ", ".join(known) if known else "none"
                raise EnvSpecError(f"unknown parameter {key!r} for twx:{game}; accepted parameters: {accepted}")
            if not _INT_RE.fullmatch(value):
                raise EnvSpecError(f"parameter {key}={value!r} for twx:{game} must be an integer")
    return game, dict(params)


def parse_tw(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    key = _norm(name)
    generator = name.strip().lower() if name.strip().lower() in TW_GENERATORS else TW_ALIASES.get(key)
    if generator is None:
        raise EnvSpecError(f"unknown TextWorld generator {name!r}; accepted: {', '.join(TW_GENERATORS)}")
    norm_params = {k.replace("-", "_"): v for k, v in params.items()}
    for k in norm_params:
        if k in TW_RESERVED_OPTIONS:
            raise EnvSpecError(
                f"parameter {k!r} is set by the adapter for tw:{generator} (seed and output come from "
                f"reset(seed, fold) and the cache dir); remove it"
            )
    for k, v in norm_params.items():
        if not _WORD_RE.fullmatch(v):
            raise EnvSpecError(f"parameter {k}={v[:64]!r} for tw:{generator} must be a number, a flag, a choice or a "
                               "name (letters, digits, '_' or '-', at most 64)")
    if validate:
        from evoskill.envs.textworld_env import validate_tw_options  # lazy: imports textworld

        validate_tw_options(EnvSpec("tw", generator, norm_params))
    return generator, norm_params


def parse_sciworld(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    from evoskill.envs.scienceworld_env import resolve_task  # lazy: reads scienceworld's task table

    task = resolve_task(name)
    out: dict[str, str] = {}
    lower = {s.lower(): s for s in SW_PARAMS}
    for key, value in params.items():
        canon = lower.get(key.lower())
        if canon is None:
            raise EnvSpecError(
                f"unknown parameter {key!r} for sciworld:{task}; accepted boolean parameters: "
                f"{', '.join(SW_PARAMS)}"
            )
        out[canon] = "1" if (parse_bool(value, key=key) if validate else value not in FALSE_VALUES) else "0"
    return task, out


def twx_environments() -> list[EnvironmentInfo]:
    out: list[EnvironmentInfo] = []
    for game, params in TWX_GAMES.items():
        aliases = tuple(sorted(a for a, g in TWX_ALIASES.items() if g == game and a != game))
        out.append(EnvironmentInfo("twx", game, TWX_DESCRIPTIONS[game], params, aliases, True, f"twx:{game}"))
    return out


def tw_environments() -> list[EnvironmentInfo]:
    from evoskill.envs.textworld_env import textworld_available

    tw_ok = textworld_available()
    examples = {
        "custom": "tw:custom?world_size=3,nb_objects=5,quest_length=3",
        "tw-coin_collector": "tw:tw-coin_collector?level=5",
        "tw-treasure_hunter": "tw:tw-treasure_hunter?level=1",
        "tw-cooking": "tw:tw-cooking?recipe=1,take=1,go=1,open=1,cook=1,cut=1",
        "tw-simple": "tw:tw-simple?rewards=dense,goal=detailed",
    }
    out: list[EnvironmentInfo] = []
    for gen, desc in TW_GENERATORS.items():
        aliases = tuple(sorted(a for a, g in TW_ALIASES.items() if g == gen and a != gen))
        out.append(EnvironmentInfo("tw", gen, desc, (), aliases, tw_ok, examples[gen]))
    return out


def sciworld_environments() -> list[EnvironmentInfo]:
    from evoskill.envs.scienceworld_env import scienceworld_available, sciworld_tasks

    sw_ok = scienceworld_available()
    return [EnvironmentInfo("sciworld", task, title, SW_PARAMS, (task_id,), sw_ok, f"sciworld:{task}")
            for task_id, task, title in sciworld_tasks()]


def _need_java(what: str) -> None:
    if not java_available():
        raise EnvUnavailableError(f"{what} needs a Java runtime (java on PATH or JAVA_HOME)")


def _make_twx(spec: EnvSpec, *, cache_dir: Path | None = None, **options: Any) -> TextEnv:
    _need_java("TextWorldExpress")
    from evoskill.envs.twx import TextWorldExpressAdapter

    return TextWorldExpressAdapter(spec, **options)


def _make_tw(spec: EnvSpec, *, cache_dir: Path | None = None, **options: Any) -> TextEnv:
    from evoskill.envs.textworld_env import TextWorldAdapter, textworld_available

    if not textworld_available():
        raise EnvUnavailableError("TextWorld is not installed: pip install 'evoskill[envs]'")
    return TextWorldAdapter(spec, cache_dir=cache_dir, **options)


def _make_sciworld(spec: EnvSpec, *, cache_dir: Path | None = None, **options: Any) -> TextEnv:
    from evoskill.envs.scienceworld_env import ScienceWorldAdapter, scienceworld_available

    if not scienceworld_available():
        raise EnvUnavailableError("ScienceWorld is not installed: pip install 'evoskill[envs]'")
    _need_java("ScienceWorld")
    return ScienceWorldAdapter(spec, **options)


TWX = EnvScheme(
    make=_make_twx, parse=parse_twx, description="TextWorldExpress: eight fast text games (one JVM per env)",
    aliases=("textworldexpress", "textworld-express", "textworld_express"), environments=twx_environments,
)
TW = EnvScheme(
    make=_make_tw, parse=parse_tw, description="TextWorld: games generated offline by tw-make, cached on disk",
    aliases=("textworld",), environments=tw_environments,
)
SCIWORLD = EnvScheme(
    make=_make_sciworld, parse=parse_sciworld, description="ScienceWorld: 30 science tasks (one JVM per env)",
    aliases=("scienceworld", "sw"), environments=sciworld_environments,
    # Hundreds to thousands of listed actions a state, and no state copy: each child stepped is a reset and a
    # replay (0.3-1 s), so none is stepped ahead of search (θ alone and the demonstrations step none either), and
    # each real step's search acts on what it found within 5 s.
    search=(("prefetch_children", 0), ("time_budget_s", 5.0)),
)
