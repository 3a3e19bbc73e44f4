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
``sw`` for ``sciworld``.

More schemes come from packages: an ``evoskill.envs`` entry point named after the scheme whose object
is an :class:`EnvScheme` (:mod:`evoskill.envs.registry`); a Gymnasium-style text env needs only
``EnvScheme.gym(factory)``, which wraps it in :class:`GymTextEnv` (docs/custom-environment.md).

A bad spec raises :class:`EnvSpecError` (an ``InvalidInput``) that names the problem and lists what
is accepted; :func:`list_environments` lists everything.

The interface
-------------

``make_env(spec, strict=True, max_steps=None, gold_path=True, cache_dir=None) -> TextEnv`` (the
scheme's ``make``), then ``env.reset(seed, fold) -> Observation`` (fold: train/dev/test) and
``env.step(action) -> (Observation, reward)``, reward being the change of the score normalised to
[0, 1] (TWX score, ScienceWorld score/100, TextWorld score/max_score). Also ``valid_actions()``,
``goal``, ``score``, ``done``, ``won``, ``lost``, ``moves``, ``actions`` (the prefix since reset),
``gold_path()``, ``template(action)`` (the action's skill: ``take X from Y``, ``open X``; from
TextWorld's command templates, ScienceWorld's action templates, a verb-phrase heuristic for TWX),
``load(parse_spec(spec))`` (another game of the same scheme in the same process: no new JVM; like the
adapters' constructors it takes an :class:`EnvSpec`, not a string), ``close()``
(shuts the JVM down), ``snapshot()``/``restore()`` (TextWorld: native copy; TWX and ScienceWorld
have none: reset + replay of the action prefix) and ``copy()`` (TextWorld only).

Errors: :class:`EnvSpecError` (bad spec, also bad params found when the env loads them),
:class:`InvalidActionError` (strict mode: action not valid; ScienceWorld asks its parser about
actions missing from its incomplete valid-action list), all ``InvalidInput``; :class:`EnvStateError`
(step before reset or after done; a ``FailedPrecondition``), :class:`EnvUnavailableError` (package or
Java runtime missing; ``Unavailable``). The kinds are those of :mod:`evoskill.core.errors`.

Modules, each importing only those before it (none imports back): ``spec`` (:class:`EnvSpec`, the
built-in tables), ``base`` (:class:`TextEnv`, :class:`BaseTextEnv`), ``jvm``, the adapters (``twx``,
``textworld_env``, ``scienceworld_env``, ``gym_adapter``), ``registry`` (:class:`EnvScheme`,
:func:`parse_spec`, :func:`list_environments`), ``schemes`` (the built-in schemes' parsers, listings and
``make``, importing their adapters when used).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evoskill.common.v1.common_pb2 import Observation
from evoskill.envs.base import (
    BaseTextEnv,
    EnvStateError,
    InvalidActionError,
    Snapshot,
    TemplateMatcher,
    TextEnv,
    heuristic_template,
)
from evoskill.envs.gym_adapter import GymTextEnv
from evoskill.envs.jvm import java_available
from evoskill.envs.registry import (
    ENTRY_POINT_GROUP,
    EnvScheme,
    EnvUnavailableError,
    describe_environments,
    list_environments,
    parse_spec,
    scheme_registry,
)
from evoskill.envs.spec import FOLDS, EnvironmentInfo, EnvSpec, EnvSpecError

__all__ = [
    "ENTRY_POINT_GROUP",
    "FOLDS",
    "BaseTextEnv",
    "EnvScheme",
    "EnvSpec",
    "EnvSpecError",
    "EnvStateError",
    "EnvUnavailableError",
    "EnvironmentInfo",
    "GymTextEnv",
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


def make_env(
    spec: str | EnvSpec,
    *,
    strict: bool = True,
    max_steps: int | None = None,
    gold_path: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> TextEnv:
    """Start the environment ``spec`` names, with its scheme's ``make``. ``reset(seed, fold)`` it before stepping.

    ``cache_dir`` is where a scheme keeps generated games (TextWorld); other ``options`` go to the
    adapter (e.g. ``generate_timeout`` for TextWorld).
    """
    parsed = parse_spec(spec)
    _, scheme = scheme_registry().resolve(parsed.scheme)
    return scheme.make(parsed, strict=strict, max_steps=max_steps, gold_path=gold_path,
                       cache_dir=Path(cache_dir) if cache_dir is not None else None, **options)
