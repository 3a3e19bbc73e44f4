"""ScienceWorld adapter (``sciworld:<task>?simplification=1``): one JVM, any task and variation."""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from typing import Any, Unpack

from evoskill.common.v1.common_pb2 import Observation
from evoskill.envs.base import AdapterOptions, BaseTextEnv, TemplateMatcher, clamp01
from evoskill.envs.jvm import shutdown_jvm
from evoskill.envs.scienceworld_names import renamed_actions
from evoskill.envs.spec import SW_OPTIONS, EnvSpec, EnvSpecError

_NO_LIMIT = 2**31 - 1
_PARSER_REJECTED = "No known action matches that input."
_AMBIGUOUS = "Ambiguous request"
# ScienceWorld names each object in its listed actions by a referent no other object shares, found by iterating the
# objects in identity-hash order and, where that leaves duplicates, by drawing from Scala's global Random: the
# random generator its animals wander and its genes mix by. So, left alone, every build of a world (reset or load)
# and every listing named some objects anew (56 of 422 listed actions between two resets: "focus on paint in wood
# cup" / "... in cup containing red paint"), a name could mean another object after the sandbox's reset and replay,
# and a listing could move the animals of a live step and not of its replay. One identity hash for every object
# makes the iteration follow insertion order, the same in every build, process and machine (replays ~35% slower:
# docs/results.md); `_FixedDraws` gives each listing the same draws and hands the simulation its own back.
_SAME_NAMES_EVERY_BUILD = "-XX:+UnlockExperimentalVMOptions -XX:hashCode=2 --add-opens=java.base/java.util=ALL-UNNAMED"
_LISTING_SEED = 0
_LCG_MULTIPLIER = 0x5DEECE66D  # java.util.Random.setSeed(s) stores s ^ this: how a saved state is put back
_JVM_OPTIONS_LOCK = threading.Lock()
# Listed at every step, and no agent's to take: the runner resets episodes. Mid-episode it restarts the game, its
# score and the focus gone, while the step budget runs on (a θ whose usual choice was marked took it instead).
_RESET = "reset task"

# ScienceWorld's action templates (get_possible_actions(), scienceworld 1.2.3) plus "go to OBJ",
# the form its valid actions and gold paths use for "go OBJ".
SW_BASE_TEMPLATES: tuple[str, ...] = (
    "activate OBJ",
    "close OBJ",
    "connect OBJ to OBJ",
    "deactivate OBJ",
    "disconnect OBJ",
    "dunk OBJ in OBJ",
    "eat OBJ",
    "flush OBJ",
    "focus on OBJ",
    "go OBJ",
    "go to OBJ",
    "inventory",
    "look around",
    "look at OBJ",
    "look in OBJ",
    "mix OBJ",
    "move OBJ to OBJ",
    "open OBJ",
    "pick up OBJ",
    "pour OBJ in OBJ",
    "put down OBJ",
    "read OBJ",
    "reset task",
    "task",
    "use OBJ on OBJ",
    "wait",
    "wait1",
)


def scienceworld_available() -> bool:
    return importlib.util.find_spec("scienceworld") is not None


def sciworld_tasks() -> list[tuple[str, str, str]]:
    """(task id, task name, title) for every ScienceWorld task; empty when not installed."""
    if not scienceworld_available():
        return []
    from scienceworld.constants import TASKS

    return [(t["task_id"], t["task_name"], f"{t['topic']}: {t['task']}") for t in TASKS]


def resolve_task(name: str) -> str:
    """Canonical task name for a name, a task id (``1-1``) or the paper's title."""
    if not scienceworld_available():
        return re.sub(r"[\s_]+", "-", name.strip().lower())
    from scienceworld.constants import ID2TASK
    from scienceworld.utils import infer_task

    names = list(ID2TASK.values())
    candidates = [name.strip(), name.strip().lower(), re.sub(r"[\s_]+", "-", name.strip().lower())]
    for cand in candidates:
        task = infer_task(cand)
        if task in names:
            return str(task)
    raise EnvSpecError(
        f"unknown ScienceWorld task {name!r}; accepted task names: {', '.join(names)}; "
        f"or task ids: {', '.join(ID2TASK)}"
    )


class ScienceWorldAdapter(BaseTextEnv):
    """ScienceWorld: 30 tasks, scores 0–100 (normalised to [0, 1]); no state save/restore.

    Folds: ``reset(seed, fold)`` loads variation ``variations(fold)[seed % n]`` of the task, from
    ScienceWorld's own train/dev/test variation lists. ``done`` when the task is completed or
    failed: ``won`` at score 100, ``lost`` otherwise (failures score -100; the normalised score
    is clamped to 0). ``snapshot()/restore()`` reset and replay the action prefix.

    Valid actions: ScienceWorld's ``get_valid_action_object_combinations()`` is not complete (its
    own gold paths use aliases such as ``examine X`` and qualified names such as ``thermometer in
    inventory``), so in strict mode an action outside that list is sent to ScienceWorld's parser:
    if the parser rejects it (no effect on the simulation) or finds it ambiguous between readings that
    differ (the request is cancelled and the state rebuilt by replay), :class:`InvalidActionError` is
    raised. Readings that all say the same (three identical seeds) are one choice: the first is taken, and
    the gold paths' choice steps ("0" after such a request) are left out of ``gold_path()``.
    """

    scheme = "sciworld"
    native_copy = False
    quiet_replays = True  # replays skip the observations they do not read (False: as a live step; `bench replay`)

    def __init__(self, spec: EnvSpec, **options: Unpack[AdapterOptions]) -> None:
        super().__init__(spec, **options)
        self._env: Any = _start_jvm()
        self._fixed_draws = _FixedDraws(self._env)
        # Gold paths come from a JVM of their own, started on the first one asked for: generating one leaves its
        # JVM's resets slow for good (mendelian-genetics: 0.1-0.5 s before, 5-9 s after, any variation), and every
        # replay that restores a state starts with a reset.
        self._gold_env: Any = None
        self._variations: dict[tuple[str, str], list[int]] = {}
        self._loaded: tuple[str, int, str] | None = None
        self._goal = ""
        self.variation: int | None = None
        self._matcher = TemplateMatcher(SW_BASE_TEMPLATES, r"\bOBJ\b")
        self._templates: dict[int, str] = {}  # the loaded task's action templates by id (`shown_names`)

    @property
    def simplifications(self) -> str:
        return ",".join(k for k, v in sorted(self._spec.params.items()) if v == "1" and k not in SW_OPTIONS)

    @property
    def shown_names(self) -> bool:
        """Objects listed as the room shows them (`?shown_names=1`, envs/scienceworld_names.py)."""
        return self._spec.params.get("shown_names") == "1"

    def variations(self, fold: str) -> list[int]:
        """ScienceWorld's variation indices of the spec's task in ``fold``."""
        key = (self._spec.name, fold)
        found = self._variations.get(key)
        if found is None:
            if self._loaded is None or self._loaded[0] != self._spec.name:
                self._env.load(self._spec.name, 0, self.simplifications, generateGoldPath=False)
                self._loaded = (self._spec.name, 0, self.simplifications)
            for f, getter in (
                ("train", self._env.get_variations_train),
                ("dev", self._env.get_variations_dev),
                ("test", self._env.get_variations_test),
            ):
                self._variations[(self._spec.name, f)] = sorted(int(v) for v in getter())
            found = self._variations[key]
        return found

    def _load(self, spec: EnvSpec) -> None:
        resolve_task(spec.name)

    def _reset(self, seed: int, fold: str) -> Observation:
        variations = self.variations(fold)
        if not variations:
            raise EnvSpecError(f"{self._spec.canonical()} has no {fold} variations")
        variation = variations[seed % len(variations)]
        loaded = self._loaded
        # ScienceWorld's reset() rebuilds the loaded variation's first state, so a replay's reset skips load's task
        # set-up (a third of a reset's time); every build names the objects alike (`_SAME_NAMES_EVERY_BUILD`).
        if loaded != (self._spec.name, variation, self.simplifications):
            try:
                self._env.load(self._spec.name, variation, self.simplifications, generateGoldPath=False)
            except ValueError as exc:
                raise EnvSpecError(f"{self._spec.canonical()}: {exc}") from exc
            self._loaded = (self._spec.name, variation, self.simplifications)
            self._matcher.add(self._env.get_possible_actions())
            self._templates = {int(t["template_id"]): str(t["action_example"])
                               for t in self._env.get_possible_actions_with_IDs()}
        self.variation = variation
        if self._replaying and loaded is self._loaded and self.quiet_replays:
            # Not loaded again, so the goal is known and nobody reads this observation: ScienceWorld's reset, less
            # the listing.
            self._env.server.reset()
            self._env.server.step("look around")
            return Observation(goal=self._goal)
        self._env.server.reset()
        text, _completed, info = self._send("look around")
        self._goal = self._task_description(info)
        self._gold = self._gold_sequence(variation) if self._need_gold else None
        return self._to_obs(text, info, completed=False)

    def _gold_sequence(self, variation: int) -> list[str]:
        """The variation's gold path, generated in the gold JVM (the same world: a variation is deterministic)."""
        if self._gold_env is None:
            self._gold_env = _start_jvm()
        self._gold_env.load(self._spec.name, variation, self.simplifications, generateGoldPath=True)
        return _without_choices(self._gold_env.get_gold_action_sequence())

    @staticmethod
    def _task_description(info: dict[str, Any]) -> str:
        text = str(info.get("taskDesc", ""))
        return re.sub(r"^\s*Task Description:\s*", "", text).strip()

    def _step(self, action: str) -> Observation:
        text, completed, info = self._send(action)
        return self._to_obs(text, info, completed=completed)

    def _send(self, action: str) -> tuple[str, bool, dict[str, Any]]:
        """ScienceWorld's reply to `action`, a question whose readings all say the same answered: "move apple
        seed (in seed jar) to flower pot 2" for each of three seeds names objects no agent can tell apart, so
        the first is taken, as ScienceWorld's own gold paths do (their "0" after such a request). Replays step
        through here too, so a restored state is the one the step reached."""
        if action == _RESET:  # every step reaches ScienceWorld here, listed or not, strict or not
            raise self._reject(action, "the runner resets episodes; mid-episode it would undo the episode's progress")
        server = self._env.server
        text = str(server.step(action))
        if _one_reading(text):
            text = str(server.step("0"))
        return text, bool(server.getCompleted()), self._info()

    def _info(self) -> dict[str, Any]:
        """What the package's `step` reads after an action, its listing named alike in every build and drawing
        none of the simulation's random numbers (`_FixedDraws`)."""
        server = self._env.server
        with self._fixed_draws:
            info = {
                "score": round(100 * float(server.getScore())),
                "look": str(server.freeActionLook()),
                "inv": str(server.freeActionInventory()),
                "taskDesc": str(server.freeActionTaskDesc()),
            }
            info["valid"] = self._shown_listing(info) if self.shown_names else list(
                server.getValidActionObjectCombinations())
            return info

    def _shown_listing(self, info: dict[str, Any]) -> list[str]:
        """The listed actions, each object called as the room or the inventory shows it (`renamed_actions`)."""
        env = self._env
        referents = {oid: o["referents"] for oid, o in env.get_all_object_ids_types_referents_LUTJSON().items()}
        return renamed_actions(env.get_valid_action_object_combinations_with_templates(), self._templates,
                               env.get_possible_object_referent_LUT(), referents, f"{info['look']}\n{info['inv']}")

    def _advance(self, action: str) -> None:
        """A replay's step without its observation: ScienceWorld's `step` lists the valid actions (and reads the
        room, inventory and task) after every action, several times the step's own cost, and a replay reads
        none of them."""
        if not self.quiet_replays:
            self._send(action)
        elif _one_reading(str(self._env.server.step(action))):
            self._env.server.step("0")

    def _step_unlisted(self, action: str) -> Observation:
        text, completed, info = self._send(action)
        reply = text.strip()
        if reply.startswith(_PARSER_REJECTED):
            raise self._reject(action, "ScienceWorld's parser does not know it")
        if reply.startswith(_AMBIGUOUS):
            options = _readings(reply)
            self._env.server.step("")  # cancel the pending choice
            # Cancelling still advances the simulation clock; rebuild the exact state by replay.
            obs, history = self._current(), list(self._history)
            self._replay(self._seed, self._fold, history)
            self._set_obs(obs)
            raise self._reject(action, f"ambiguous in ScienceWorld (could be: {'; '.join(options[:8])})")
        return self._to_obs(text, info, completed=completed)

    def _to_obs(self, text: str, info: dict[str, Any], *, completed: bool) -> Observation:
        raw = float(info.get("score", 0))
        won = completed and raw >= 100
        lost = (completed and not won) or raw < 0
        return Observation(
            text=str(text).strip(),
            goal=self._goal,
            valid_actions=[a for a in map(str, info.get("valid", [])) if a != _RESET],
            score=clamp01(raw / 100.0),
            done=won or lost,
            won=won,
            lost=lost,
            inventory=str(info.get("inv", "")).strip(),
            look=str(info.get("look", "")).strip(),
        )

    def template(self, action: str) -> str:
        return self._matcher(action)

    @property
    def templates(self) -> list[str]:
        return self._matcher.templates

    def _close(self) -> None:
        shutdown_jvm(self._env)
        if self._gold_env is not None:
            shutdown_jvm(self._gold_env)


def _start_jvm() -> Any:
    """A ScienceWorld JVM that names objects the same at every build (`_SAME_NAMES_EVERY_BUILD`), beside any
    options the process already gives its JVMs (the sandbox worker's heap cap). The package starts its JVM with
    no options of its own, so they travel in JAVA_TOOL_OPTIONS, set only while this one starts."""
    from scienceworld import ScienceWorldEnv

    with _JVM_OPTIONS_LOCK:
        inherited = os.environ.get("JAVA_TOOL_OPTIONS")
        options = f"{inherited} {_SAME_NAMES_EVERY_BUILD}" if inherited else _SAME_NAMES_EVERY_BUILD
        os.environ["JAVA_TOOL_OPTIONS"] = options
        try:
            return ScienceWorldEnv("", envStepLimit=_NO_LIMIT)
        finally:
            if inherited is None:
                del os.environ["JAVA_TOOL_OPTIONS"]
            else:
                os.environ["JAVA_TOOL_OPTIONS"] = inherited


class _FixedDraws:
    """While held, Scala's global Random draws the same numbers at every use (`_LISTING_SEED`); on leaving, the
    simulation's own sequence goes on where it was. Its state is read by reflection (java.util opened to py4j:
    `_SAME_NAMES_EVERY_BUILD`) and put back by `setSeed`."""

    def __init__(self, env: Any) -> None:
        self._random = getattr(getattr(env._gateway.jvm.scala.util, "Random$"), "MODULE$").self()
        self._state = self._random.getClass().getDeclaredField("seed")
        self._state.setAccessible(True)
        self._saved = 0

    def __enter__(self) -> None:
        self._saved = int(self._state.get(self._random))
        self._random.setSeed(_LISTING_SEED)

    def __exit__(self, *exc: object) -> None:
        self._random.setSeed(self._saved ^ _LCG_MULTIPLIER)


def _one_reading(reply: str) -> bool:
    """Whether `reply` asks which of several readings that all say the same is meant."""
    return reply.lstrip().startswith(_AMBIGUOUS) and len(set(_readings(reply))) == 1


def _readings(question: str) -> list[str]:
    """The readings an "Ambiguous request" lists, one a line after its first ("0:\tmove apple seed (...)")."""
    return [line.split("\t", 1)[-1].strip() for line in question.strip().splitlines()[1:] if line.strip()]


def _without_choices(gold: Any) -> list[str]:
    """ScienceWorld's gold path without its answers to "Ambiguous request" (a number after the request): the
    adapter answers those itself (`_send`), so each gold step is one action an agent could send."""
    actions = [str(a) for a in gold]
    return [a for i, a in enumerate(actions) if not (i and a.strip().isdigit())]
