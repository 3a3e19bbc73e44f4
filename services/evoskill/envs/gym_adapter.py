"""Gymnasium-style text environments as :class:`~evoskill.envs.base.TextEnv`: one adapter, duck-typed.

The wrapped env (gymnasium itself is not needed) has Gymnasium's API with text actions:

* ``reset(*, seed, options) -> (observation, info)``; ``options`` is ``{"fold": "train"|"dev"|"test"}``
  and ``seed`` is already the fold's own game seed (train 0…, dev 1 000 000…, test 2 000 000…), so an
  env without splits of its own still never plays a test game in training;
* ``step(action) -> (observation, reward, terminated, truncated, info)``;
* an observation is text (or a mapping with a ``"text"`` entry).

What evoskill needs beyond that comes from ``info`` or, failing that, from the env:

* valid actions (required): ``info["valid_actions"]`` (or ``"admissible_commands"``, TextWorld's
  name), else a ``valid_actions()`` method;
* score: ``info["score"]`` out of ``info["max_score"]`` (or a ``max_score`` attribute), else the
  rewards summed since reset, out of ``max_score`` (default 1); normalised to [0, 1];
* won/lost: ``info["won"]``/``info["lost"]``, else terminated at full score is a win and terminated
  otherwise a loss; truncated ends the episode as neither;
* optional: ``info["goal"]`` (or a ``goal`` attribute), a gold path as ``info["gold_path"]`` at reset
  (or a ``gold_path()`` method), ``info["inventory"]``/``info["look"]``, a ``template(action)`` method
  (the action's skill; default: the verb-phrase heuristic), ``close()``.

No native state copy: ``snapshot()``/``restore()`` reset and replay the action prefix, so the env must
be deterministic given its seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Unpack

from evoskill.common.v1.common_pb2 import Observation
from evoskill.envs.base import AdapterOptions, BaseTextEnv, clamp01, heuristic_template
from evoskill.envs.spec import EnvSpec, fold_seed

_VALID_KEYS = ("valid_actions", "admissible_commands")


def _text(observation: Any) -> str:
    if isinstance(observation, Mapping) and "text" in observation:
        return str(observation["text"])
    return str(observation)


class GymTextEnv(BaseTextEnv):
    """A Gymnasium-style text env made by ``factory(spec)``, for any scheme (see the module docstring).

    ``load(spec)`` makes a new env with the factory; the old one is closed.
    """

    def __init__(self, spec: EnvSpec, factory: Callable[[EnvSpec], Any], **options: Unpack[AdapterOptions]) -> None:
        super().__init__(spec, **options)
        self._factory = factory
        self._env: Any = factory(self._spec)
        self._return = 0.0  # rewards since reset: the score when info carries none
        self._goal = ""

    @property
    def env(self) -> Any:
        """The wrapped env."""
        return self._env

    def template(self, action: str) -> str:
        own = getattr(self._env, "template", None)
        return str(own(action)) if callable(own) else heuristic_template(action)

    def _load(self, spec: EnvSpec) -> None:
        env = self._factory(spec)
        self._close()
        self._env = env

    def _reset(self, seed: int, fold: str) -> Observation:
        observation, info = self._env.reset(seed=fold_seed(seed, fold), options={"fold": fold})
        self._return = 0.0
        self._goal = str(info.get("goal", getattr(self._env, "goal", "")) or "")
        if self._need_gold:
            own = getattr(self._env, "gold_path", None)
            gold = info.get("gold_path", own() if callable(own) else None)
            self._gold = [str(a) for a in gold] if gold is not None else None
        else:
            self._gold = None
        return self._to_obs(observation, info, False, False)

    def _step(self, action: str) -> Observation:
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._return += float(reward)
        return self._to_obs(observation, info, bool(terminated), bool(truncated))

    def _valid_actions(self, info: Mapping[str, Any]) -> list[str]:
        for key in _VALID_KEYS:
            if key in info:
                return [str(a) for a in info[key]]
        own = getattr(self._env, "valid_actions", None)
        if callable(own):
            return [str(a) for a in own()]
        raise TypeError(f"{type(self._env).__name__} gives no valid actions: return them as info['valid_actions'] "
                        "or define a valid_actions() method")

    def _to_obs(self, observation: Any, info: Mapping[str, Any], terminated: bool, truncated: bool) -> Observation:
        max_score = float(info.get("max_score") or getattr(self._env, "max_score", None) or 1.0)
        score = clamp01(float(info.get("score", self._return)) / max_score)
        won = bool(info["won"]) if "won" in info else terminated and score >= 1.0
        lost = bool(info["lost"]) if "lost" in info else terminated and not won
        return Observation(
            text=_text(observation),
            goal=self._goal,
            valid_actions=self._valid_actions(info),
            score=score,
            done=terminated or truncated or won or lost,
            won=won,
            lost=lost,
            inventory=str(info.get("inventory", "")),
            look=str(info.get("look", "")),
        )

    def _close(self) -> None:
        close = getattr(self._env, "close", None)
        if callable(close):
            close()
