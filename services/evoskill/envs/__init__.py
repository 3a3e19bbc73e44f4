"""Environment adapters behind one interface (:class:`TextEnv`), selected by one spec string.

Environment specs
-----------------

One string selects an environment everywhere (CLI, config, gRPC, events)::

    spec   := scheme ":" name [ "?" param { "," param } ]
    param  := key "=" value          (',' or '&' between params; spaces around them are ignored)

``twx:<game>`` — TextWorldExpress (one JVM per env). Games: ``cookingworld``, ``coin``, ``twc``,
``mapreader``, ``arithmetic``, ``sorting``, ``simonsays``, ``peckingorder`` (aliases such as
``coincollector``, ``cooking``, ``commonsense``). Params are TWX gameParams, all integers, e.g.
``twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,limitInventorySize=0``.
Fold seeds: ``reset(seed, fold)`` plays TWX's game seed ``fold_seeds[seed % 1000]`` of that fold
(train 0–999, dev 10000–10999, test 20000–20999).

``tw:<generator>`` — TextWorld games generated offline by ``tw-make`` and cached under
``.evoskill/cache/textworld/`` (``cache_dir=`` to change), keyed by generator, options and seed.
Generators: ``custom`` (``world_size``, ``nb_objects``, ``quest_length``, ``quest_breadth``,
``theme``, ...), ``tw-coin_collector`` (``level``), ``tw-treasure_hunter`` (``level``),
``tw-cooking`` (``recipe``, ``take``, ``go``, ``open``, ``cook``, ``cut``, ``drop``, ``split``,
``recipe_seed``), ``tw-simple`` (``rewards``, ``goal``, ``test``). Option names are tw-make's,
with ``_`` for ``-``; flags take 1/0. E.g. ``tw:custom?world_size=3,nb_objects=5,quest_length=3``,
``tw:tw-coin_collector?level=5``, ``tw:tw-cooking?recipe=1,take=1,go=1,open=1,cook=1,cut=1``.
Fold seeds: ``tw-make --seed`` is ``seed % 10**6`` plus 0 (train), 1 000 000 (dev) or
2 000 000 (test); tw-cooking also gets ``--split train|valid|test`` unless ``split`` is given.

``sciworld:<task>`` — ScienceWorld (one JVM per env), any of its 30 tasks by name (``boil``,
``find-living-thing``, ...) or id (``1-1``). Params: boolean simplifications ``easy``,
``teleportAction``, ``selfWateringFlowerPots``, ``openContainers``, ``openDoors``,
``noElectricalAction`` (e.g. ``sciworld:boil?teleportAction=1,openDoors=1``). Folds:
``reset(seed, fold)`` loads the task's ``fold`` variation number ``seed % n`` (ScienceWorld's own
train/dev/test variation lists).

Scheme aliases: ``textworld-express`` for ``twx``, ``textworld`` for ``tw``, ``scienceworld`` and
``sw`` for ``sciworld``. A bad spec raises :class:`EnvSpecError` (an ``InvalidInput``) that names the
problem and lists what is accepted; :func:`list_environments` lists everything.

The interface
-------------

``make_env(spec, strict=True, max_steps=None, gold_path=True, cache_dir=None) -> TextEnv``, then
``env.reset(seed, fold) -> Observation`` (fold: train/dev/test) and
``env.step(action) -> (Observation, reward)``, reward being the change of the score normalised to
[0, 1] (TWX score, ScienceWorld score/100, TextWorld score/max_score). Also ``valid_actions()``,
``goal``, ``score``, ``done``, ``won``, ``lost``, ``moves``, ``actions`` (the prefix since reset),
``gold_path()``, ``template(action)`` (the action's skill: ``take X from Y``, ``open X``; from
TextWorld's command templates, ScienceWorld's action templates, a verb-phrase heuristic for TWX),
``load(spec)`` (another game of the same scheme in the same process: no new JVM), ``close()``
(shuts the JVM down), ``snapshot()``/``restore()`` (TextWorld: native copy; TWX and ScienceWorld
have none: reset + replay of the action prefix) and ``copy()`` (TextWorld only).

Errors: :class:`EnvSpecError` (bad spec, also bad params found when the env loads them),
:class:`InvalidActionError` (strict mode: action not valid; ScienceWorld asks its parser about
actions missing from its incomplete valid-action list), all ``InvalidInput``; :class:`EnvStateError`
(step before reset or after done; a ``FailedPrecondition``), :class:`EnvUnavailableError` (package or
Java runtime missing; ``Unavailable``). The kinds are those of :mod:`evoskill.core.errors`.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.errors import Unavailable
from evoskill.envs.base import (
    BaseTextEnv,
    EnvStateError,
    InvalidActionError,
    Snapshot,
    TemplateMatcher,
    TextEnv,
    heuristic_template,
)
from evoskill.envs.spec import (
    FOLDS,
    SCHEMES,
    EnvironmentInfo,
    EnvSpec,
    EnvSpecError,
    describe_environments,
    list_environments,
    parse_spec,
)

__all__ = [
    "FOLDS",
    "SCHEMES",
    "BaseTextEnv",
    "EnvSpec",
    "EnvSpecError",
    "EnvStateError",
    "EnvUnavailableError",
    "EnvironmentInfo",
    "InvalidActionError",
    "Observation",
    "Snapshot",
    "TemplateMatcher",
    "TextEnv",
    "describe_environments",
    "heuristic_template",
    "java_available",
    "list_environments",
    "make_env",
    "parse_spec",
]


class EnvUnavailableError(Unavailable):
    """The spec is fine but this machine cannot run it (package or Java runtime missing)."""


def java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.isfile(os.path.join(java_home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def make_env(
    spec: str | EnvSpec,
    *,
    strict: bool = True,
    max_steps: int | None = None,
    gold_path: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> TextEnv:
    """Start the environment ``spec`` names. ``reset(seed, fold)`` it before stepping.

    ``cache_dir`` (TextWorld only) is where generated games are kept; other ``options`` go to
    the adapter (e.g. ``generate_timeout`` for TextWorld).
    """
    parsed = parse_spec(spec)
    common: dict[str, Any] = {"strict": strict, "max_steps": max_steps, "gold_path": gold_path, **options}
    if parsed.scheme == "twx":
        if not java_available():
            raise EnvUnavailableError("TextWorldExpress needs a Java runtime (java on PATH or JAVA_HOME)")
        from evoskill.envs.twx import TextWorldExpressAdapter

        return TextWorldExpressAdapter(parsed, **common)
    if parsed.scheme == "tw":
        from evoskill.envs.textworld_env import TextWorldAdapter, textworld_available

        if not textworld_available():
            raise EnvUnavailableError("TextWorld is not installed: pip install 'evoskill[envs]'")
        return TextWorldAdapter(parsed, cache_dir=cache_dir, **common)
    from evoskill.envs.scienceworld_env import ScienceWorldAdapter, scienceworld_available

    if not scienceworld_available():
        raise EnvUnavailableError("ScienceWorld is not installed: pip install 'evoskill[envs]'")
    if not java_available():
        raise EnvUnavailableError("ScienceWorld needs a Java runtime (java on PATH or JAVA_HOME)")
    return ScienceWorldAdapter(parsed, **common)
