"""The built-in schemes, declared as ``evoskill.envs`` entry points like any plug-in.

Importing this module imports no environment package: each adapter is imported when a game starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evoskill.envs.base import TextEnv
from evoskill.envs.jvm import java_available
from evoskill.envs.registry import EnvScheme, EnvUnavailableError
from evoskill.envs.spec import (
    EnvSpec,
    parse_sciworld,
    parse_tw,
    parse_twx,
    sciworld_environments,
    tw_environments,
    twx_environments,
)


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
