"""TextWorldExpress adapter (``twx:<game>?k=v``): one JVM per adapter, reset to any game/seed."""

from __future__ import annotations

from typing import Any, Unpack

from evoskill.common.v1.common_pb2 import Observation
from evoskill.envs.base import AdapterOptions, BaseTextEnv, clamp01
from evoskill.envs.jvm import shutdown_jvm
from evoskill.envs.spec import EnvSpec, EnvSpecError

# The python wrapper ends an episode after envStepLimit moves; the adapter's max_steps does that.
_NO_LIMIT = 2**31 - 1


class TextWorldExpressAdapter(BaseTextEnv):
    """TextWorldExpress: eight games, thousands of steps per second, one JVM per adapter.

    Folds: ``reset(seed, fold)`` plays the game seed ``fold_seeds(fold)[seed % n]`` with that
    ``gameFold`` (in textworld-express 1.1.0: train 0–999, dev 10000–10999, test 20000–20999, and
    each fold draws objects from its own set), so the same seed gives different games per fold.
    No native state copy: ``snapshot()/restore()`` replays the action prefix (≈0.3 ms a step).
    """

    scheme = "twx"
    native_copy = False

    def __init__(self, spec: EnvSpec, **options: Unpack[AdapterOptions]) -> None:
        super().__init__(spec, **options)
        from textworld_express import TextWorldExpressEnv

        self._env: Any = TextWorldExpressEnv(envStepLimit=_NO_LIMIT)
        self._fold_seeds: dict[str, list[int]] = {}
        self._goal = ""
        try:
            self._load(self._spec)
        except BaseException:
            shutdown_jvm(self._env)
            raise

    def fold_seeds(self, fold: str) -> list[int]:
        """The game seeds TextWorldExpress assigns to ``fold`` for the loaded game."""
        seeds = self._fold_seeds.get(fold)
        if seeds is None:
            getter = {
                "train": self._env.getValidSeedsTrain,
                "dev": self._env.getValidSeedsDev,
                "test": self._env.getValidSeedsTest,
            }[fold]
            seeds = sorted(int(s) for s in getter())
            self._fold_seeds[fold] = seeds
        return seeds

    def game_seed(self, seed: int, fold: str) -> int:
        seeds = self.fold_seeds(fold)
        return seeds[seed % len(seeds)]

    def _load(self, spec: EnvSpec) -> None:
        params = ",".join(f"{k}={v}" for k, v in sorted(spec.params.items()))
        try:
            self._env.load(spec.name, params)
        except ValueError as exc:
            if spec != self._spec:  # a failed load leaves the JVM without a game: put the old one back
                old = ",".join(f"{k}={v}" for k, v in sorted(self._spec.params.items()))
                self._env.load(self._spec.name, old)
            raise EnvSpecError(f"{spec.canonical()}: {str(exc).strip()}") from exc
        self._fold_seeds.clear()

    def _reset(self, seed: int, fold: str) -> Observation:
        text, infos = self._env.reset(seed=self.game_seed(seed, fold), gameFold=fold, generateGoldPath=self._need_gold)
        if str(text).startswith("ERROR"):
            raise EnvSpecError(f"{self._spec.canonical()}: TextWorldExpress could not make the game: {text}")
        self._goal = str(infos.get("taskDescription", ""))
        self._gold = [str(a) for a in self._env.getGoldActionSequence()] if self._need_gold else None
        return self._to_obs(text, infos)

    def _step(self, action: str) -> Observation:
        text, _reward, _done, infos = self._env.step(action)
        return self._to_obs(text, infos)

    def _to_obs(self, text: str, infos: dict[str, Any]) -> Observation:
        won = bool(infos.get("tasksuccess", False))
        lost = bool(infos.get("taskfailure", False))
        return Observation(
            text=str(text),
            goal=self._goal,
            valid_actions=[str(a) for a in infos.get("validActions", [])],
            score=clamp01(float(infos.get("score", 0.0))),
            done=won or lost,
            won=won,
            lost=lost,
            inventory=str(infos.get("inventory", "")),
            look=str(infos.get("look", "")),
        )

    def _close(self) -> None:
        shutdown_jvm(self._env)
