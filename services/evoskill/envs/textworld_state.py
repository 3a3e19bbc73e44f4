"""In-place snapshots of a TextWorld env: the Z-machine's own state plus what TextWorld's wrappers keep in Python.

``env.copy()`` starts a new Frotz library (twice: JerichoEnv.copy loads the game, then replaces it with the
FrotzEnv's copy) and deep-copies each wrapper's GameState, game included. A search probe needs neither: the
game stays loaded and only the state that steps change is put back.

What steps change, per layer of ``textworld.start`` on a TextWorld game (TWInform7 > StateTracking >
Inform7Data > GameData > JerichoEnv > jericho.FrotzEnv): the FrotzEnv's RAM, stack, registers, RNG and
narrative (``get_state()``); every wrapper's ``state`` (a fresh GameState each step); Inform7Data's
``_tracked_infos`` and ``_prev_state``; StateTracking's ``_game_progression`` (updated in place),
``_last_action``, winning policies and ``_moves``; JerichoEnv's ``_reset``. The rest of each layer's
attributes (game, its Inform7 view, request_infos, file names) is set by ``load`` and shared by reference.
Every attribute but the wrapped env is saved, so a field a later TextWorld adds is not silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textworld.core import GameState
from textworld.envs.zmachine.jericho import JerichoEnv
from textworld.generator.game import GameProgression

_INNER = "_wrapped_env"


@dataclass(frozen=True)
class TextWorldState:
    """One env's state: ``layers[i]`` holds the attributes of the i-th layer from the outside in."""

    gamefile: str
    kinds: tuple[type, ...]
    layers: tuple[dict[str, Any], ...]
    machine: tuple[Any, ...]  # jericho.FrotzEnv.get_state()


def _layers(env: Any) -> list[Any] | None:
    """The wrapper chain down to the JerichoEnv, or None where it does not end in a running one."""
    chain = [env]
    while _INNER in vars(chain[-1]):
        chain.append(vars(chain[-1])[_INNER])
    bottom = chain[-1]
    if not isinstance(bottom, JerichoEnv) or bottom._jericho is None:
        return None
    return chain


def _fork(value: Any, memo: dict[int, Any]) -> Any:
    """A copy of ``value`` that later steps cannot change. The game progression is forked and containers are
    copied (a GameState's values too); the rest is shared. ``memo`` keeps shared objects shared (every layer's
    ``state`` is one GameState, whose ``_game_progression`` is StateTracking's)."""
    key = id(value)
    if key in memo:
        return memo[key]
    out: Any
    if isinstance(value, GameProgression):
        out = value.copy()
    elif isinstance(value, GameState):
        out = GameState({k: _fork(v, memo) for k, v in value.items()})
    elif type(value) in (list, dict, set):
        out = type(value)(value)
    else:
        out = value
    memo[key] = out
    return out


def _attrs(layer: Any, memo: dict[int, Any]) -> dict[str, Any]:
    return {k: _fork(v, memo) for k, v in vars(layer).items() if k not in (_INNER, "_jericho")}


def capture(env: Any) -> TextWorldState | None:
    """``env``'s state, or None where it is not a chain of TextWorld wrappers over a running JerichoEnv."""
    chain = _layers(env)
    if chain is None:
        return None
    memo: dict[int, Any] = {}
    return TextWorldState(
        gamefile=chain[-1].gamefile,
        kinds=tuple(type(layer) for layer in chain),
        layers=tuple(_attrs(layer, memo) for layer in chain),
        machine=chain[-1]._jericho.get_state(),
    )


def apply(env: Any, saved: TextWorldState) -> bool:
    """Put ``saved`` back on ``env`` (the same wrappers, loading the saved game first if another is loaded);
    False, touching nothing, where ``env``'s wrappers differ. ``saved`` stays reusable."""
    chain = _layers(env)
    if chain is None or tuple(type(layer) for layer in chain) != saved.kinds:
        return False
    if chain[-1].gamefile != saved.gamefile:
        env.load(saved.gamefile)
    memo: dict[int, Any] = {}
    for layer, attrs in zip(chain, saved.layers, strict=True):
        vars(layer).update({k: _fork(v, memo) for k, v in attrs.items()})
    chain[-1]._jericho.set_state(saved.machine)
    return True
