"""The environment interface (:class:`TextEnv`), its errors, and the shared adapter logic."""

from __future__ import annotations

import abc
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypedDict, runtime_checkable

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.envs.spec import FOLDS, EnvSpec, EnvSpecError

__all__ = [
    "AdapterOptions",
    "BaseTextEnv",
    "EnvStateError",
    "InvalidActionError",
    "Observation",
    "Snapshot",
    "TemplateMatcher",
    "TextEnv",
    "heuristic_template",
]


class InvalidActionError(InvalidInput):
    """The action is not valid in the current state (strict mode), or the env's parser rejected it."""

    def __init__(self, action: str, message: str, valid_actions: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.action = action
        self.valid_actions = list(valid_actions)


class EnvStateError(FailedPrecondition):
    """The call does not fit the episode's state: step before reset, step after done, closed env."""


@dataclass(frozen=True)
class Snapshot:
    """Where an episode is: enough to get back there with :meth:`TextEnv.restore`.

    ``actions`` is always filled, so any env can be restored by replaying the prefix; ``native``
    holds the env's own saved state where it has one (TextWorld), making restore O(1).
    """

    spec: EnvSpec
    seed: int
    fold: str
    actions: tuple[str, ...]
    observation: bytes
    gold_path: tuple[str, ...] | None = None
    native: Any = field(default=None, compare=False, repr=False)


@runtime_checkable
class TextEnv(Protocol):
    """One text environment, one episode at a time; ``reset`` starts the next in the same process.

    Observations are ``evoskill.common.v1.Observation`` messages (text, goal, valid_actions,
    score, done, won, lost, moves, inventory, look) with the score normalised to [0, 1].
    """

    native_copy: ClassVar[bool]  # True where copy()/snapshot() use the env's own state copy
    strict: bool  # reject actions outside valid_actions() with InvalidActionError
    want_gold_path: bool  # compute the gold path at each reset (off: resets that need none cost less)
    max_steps: int | None  # episode is done (truncated) after this many steps

    @property
    def spec(self) -> EnvSpec: ...
    @property
    def seed(self) -> int: ...
    @property
    def fold(self) -> str: ...
    @property
    def goal(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def done(self) -> bool: ...
    @property
    def won(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    @property
    def moves(self) -> int: ...
    @property
    def actions(self) -> list[str]:
        """Actions taken since reset: the prefix that replays to the current state."""
        ...

    def load(self, spec: EnvSpec) -> None:
        """Switch to another game/task of the same scheme (same process/JVM); next reset uses it."""
        ...

    def reset(self, seed: int = 0, fold: str = "train") -> Observation:
        """Start the episode (seed, fold); the same pair always gives the same game."""
        ...

    def step(self, action: str) -> tuple[Observation, float]:
        """Act; returns the observation and the reward (change of the normalised score)."""
        ...

    def observation(self) -> Observation: ...
    def valid_actions(self) -> list[str]: ...
    def gold_path(self) -> list[str] | None:
        """A winning action sequence from the episode's start, or None."""
        ...

    def template(self, action: str) -> str:
        """The action's skill: its verb with slots (``take X from Y``); deterministic."""
        ...

    def snapshot(self) -> Snapshot: ...
    def restore(self, snapshot: Snapshot) -> Observation: ...
    def copy(self) -> TextEnv:
        """An independent env at the same state (native_copy envs only; else NotImplementedError)."""
        ...

    def close(self) -> None:
        """Release the env (shuts its JVM down); idempotent."""
        ...


# ----------------------------------------------------------------------------------------------
# Templates
# ----------------------------------------------------------------------------------------------

SLOTS = ("X", "Y", "Z")
_DIRECTIONS = frozenset(
    {"north", "south", "east", "west", "up", "down", "northeast", "northwest", "southeast", "southwest"}
)
_LITERAL_ACTIONS = frozenset(
    {
        "inventory",
        "look",
        "look around",
        "task",
        "prepare meal",
        "jump up and down",
        "wait",
        "wait1",
        "reset task",
        "help",
        "score",
        "goal",
    }
)
# Verb phrases of more than one word, longest first.
_MULTIWORD_VERBS = (
    "jump up and down",
    "pick up",
    "put down",
    "look at",
    "look in",
    "focus on",
    "go to",
    "turn on",
    "turn off",
)
_PREPOSITIONS = ("into", "in", "on", "from", "to", "with")
_PREP_RE = re.compile(r"^(.+?) (" + "|".join(_PREPOSITIONS) + r") (.+)$")


def _clean(action: str) -> str:
    return " ".join(action.strip().lower().split())


def heuristic_template(action: str) -> str:
    """Verb phrase with object slots: ``put red apple in fridge`` -> ``put X in Y``.

    Deterministic and state-free. Directions stay literal (``move north``, ``open door to west``,
    as TextWorld's own ``go east`` templates), fixed commands (``inventory``, ``look around``,
    ``prepare meal``) stay as they are; the object phrase after the verb becomes ``X`` and the one
    after the first preposition (in, into, on, from, to, with) becomes ``Y``.
    """
    a = _clean(action)
    if not a or a in _LITERAL_ACTIONS or " " not in a:
        return a
    words = a.split()
    if words[-1] in _DIRECTIONS and (len(words) == 2 or a.startswith(("open door to", "close door to"))):
        return a
    verb = next((v for v in _MULTIWORD_VERBS if a == v or a.startswith(v + " ")), words[0])
    rest = a[len(verb) :].strip()
    if not rest:
        return verb
    m = _PREP_RE.match(rest)
    if m:
        return f"{verb} X {m.group(2)} Y"
    return f"{verb} X"


@dataclass(frozen=True)
class _Pattern:
    template: str
    regex: re.Pattern[str]
    literal: int


class TemplateMatcher:
    """Maps actions to slot templates given a list of the env's own command templates.

    ``placeholder`` is a regex matching one slot in the env's templates (``{o}`` in TextWorld,
    ``OBJ`` in ScienceWorld). Slots are renamed ``X``, ``Y``, ``Z`` in order. When several
    templates match, the one with the most literal text wins (``take X from Y`` over ``take X``);
    when none does, :func:`heuristic_template` decides.
    """

    def __init__(self, templates: Iterable[str], placeholder: str) -> None:
        self._placeholder = re.compile(placeholder)
        self._patterns: dict[str, _Pattern] = {}
        self._cache: dict[str, str] = {}
        self.add(templates)

    def add(self, templates: Iterable[str]) -> None:
        for raw in templates:
            parts = [p.lower() for p in self._placeholder.split(" ".join(raw.strip().split()))]
            if len(parts) - 1 > len(SLOTS):
                continue
            norm = parts[0] + "".join(SLOTS[i] + p for i, p in enumerate(parts[1:]))
            if norm in self._patterns:
                continue
            rx = "".join(re.escape(p) + ("(.+?)" if i < len(parts) - 1 else "") for i, p in enumerate(parts))
            literal = sum(len(p.strip()) for p in parts)
            self._patterns[norm] = _Pattern(norm, re.compile("^" + rx + "$"), literal)
            self._cache.clear()

    @property
    def templates(self) -> list[str]:
        return sorted(self._patterns)

    def __call__(self, action: str) -> str:
        a = _clean(action)
        hit = self._cache.get(a)
        if hit is not None:
            return hit
        best: _Pattern | None = None
        for pat in self._patterns.values():
            if pat.regex.match(a) and (
                best is None
                or pat.literal > best.literal
                or (pat.literal == best.literal and pat.template < best.template)
            ):
                best = pat
        out = best.template if best is not None else heuristic_template(a)
        if len(self._cache) < 100_000:
            self._cache[a] = out
        return out


# ----------------------------------------------------------------------------------------------
# Shared adapter logic
# ----------------------------------------------------------------------------------------------


def _parsed(spec: object, what: str) -> EnvSpec:
    # Parsing a spec string needs the schemes (registry), and the registry's gym scheme needs this module.
    if not isinstance(spec, EnvSpec):
        raise TypeError(f"{what} takes an EnvSpec, not {type(spec).__name__} {spec!r}: pass "
                        f"evoskill.envs.parse_spec({spec!r})")
    return spec


class AdapterOptions(TypedDict, total=False):
    """The options every adapter takes (see `BaseTextEnv`). An adapter's constructor passes them on as
    ``**options: Unpack[AdapterOptions]``, so their defaults are declared once, by BaseTextEnv."""

    strict: bool
    max_steps: int | None
    gold_path: bool


class BaseTextEnv(abc.ABC):
    """Bookkeeping shared by the adapters: validity checks, step limit, reward, history, snapshots.

    Options (keyword arguments of every adapter and of ``make_env``):

    * ``strict`` (default True): an action outside ``valid_actions()`` raises
      :class:`InvalidActionError` before it reaches the env. ``strict=False`` passes any text
      through to the env's own parser.
    * ``max_steps`` (default None): the episode is done (truncated, neither won nor lost) after
      this many steps.
    * ``gold_path`` (default True): have the env compute a gold action sequence on reset.
    """

    scheme: ClassVar[str] = ""
    native_copy: ClassVar[bool] = False

    def __init__(
        self,
        spec: EnvSpec,
        *,
        strict: bool = True,
        max_steps: int | None = None,
        gold_path: bool = True,
    ) -> None:
        parsed = _parsed(spec, type(self).__name__)
        if self.scheme and parsed.scheme != self.scheme:  # "": an adapter of any scheme (GymTextEnv)
            raise EnvSpecError(f"{type(self).__name__} runs {self.scheme}: specs, not {parsed.canonical()!r}")
        if max_steps is not None and max_steps <= 0:
            raise InvalidInput(f"max_steps must be positive, got {max_steps}")
        self._spec = parsed
        self.strict = strict
        self.max_steps = max_steps
        self.want_gold_path = gold_path
        self._seed = 0
        self._fold = "train"
        self._obs: Observation | None = None
        self._valid: frozenset[str] = frozenset()
        self._history: list[str] = []
        self._gold: list[str] | None = None
        self._replaying = False
        self._closed = False

    # -- properties -----------------------------------------------------------------------------
    @property
    def spec(self) -> EnvSpec:
        return self._spec

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def fold(self) -> str:
        return self._fold

    @property
    def goal(self) -> str:
        return self._current().goal

    @property
    def score(self) -> float:
        return self._current().score

    @property
    def done(self) -> bool:
        return self._current().done

    @property
    def won(self) -> bool:
        return self._current().won

    @property
    def lost(self) -> bool:
        return self._current().lost

    @property
    def moves(self) -> int:
        return len(self._history)

    @property
    def actions(self) -> list[str]:
        """Actions accepted since the last reset (the prefix that replays to the current state)."""
        return list(self._history)

    # -- the interface --------------------------------------------------------------------------
    def load(self, spec: EnvSpec) -> None:
        """Switch to another game/task of the same scheme; takes effect at the next reset."""
        self._check_open()
        parsed = _parsed(spec, "load()")
        if parsed.scheme != self._spec.scheme:
            raise EnvSpecError(
                f"this {self._spec.scheme} env cannot load {parsed.canonical()!r}; make a new env for that scheme"
            )
        if parsed != self._spec:
            self._load(parsed)
            self._spec = parsed
            self._obs = None

    def reset(self, seed: int = 0, fold: str = "train") -> Observation:
        self._check_open()
        if fold not in FOLDS:
            raise InvalidInput(f"unknown fold {fold!r}; accepted folds: {', '.join(FOLDS)}")
        if not isinstance(seed, int) or seed < 0:
            raise InvalidInput(f"seed must be a non-negative integer, got {seed!r}")
        obs = self._reset(seed, fold)
        obs.moves = 0
        self._seed, self._fold = seed, fold
        self._history = []
        self._set_obs(obs)
        return self.observation()

    def step(self, action: str) -> tuple[Observation, float]:
        prev = self._current()
        if prev.done:
            raise EnvStateError(f"episode is over ({self._end_reason(prev)}); call reset()")
        action = " ".join(action.split())
        if not action:
            raise InvalidActionError(action, "empty action", self.valid_actions())
        obs = self._step_unlisted(action) if self.strict and action not in self._valid else self._step(action)
        self._history.append(action)
        obs.moves = len(self._history)
        if self.max_steps is not None and obs.moves >= self.max_steps:
            obs.done = True
        reward = float(obs.score - prev.score)
        self._set_obs(obs)
        return self.observation(), reward

    def observation(self) -> Observation:
        """A copy of the current observation."""
        out = Observation()
        out.CopyFrom(self._current())
        return out

    def valid_actions(self) -> list[str]:
        return list(self._current().valid_actions)

    def gold_path(self) -> list[str] | None:
        """The env's gold action sequence from the start of the episode (None if not generated)."""
        self._current()
        return list(self._gold) if self._gold is not None else None

    def template(self, action: str) -> str:
        return heuristic_template(action)

    def snapshot(self) -> Snapshot:
        obs = self._current()
        return Snapshot(
            spec=self._spec,
            seed=self._seed,
            fold=self._fold,
            actions=tuple(self._history),
            observation=obs.SerializeToString(),
            gold_path=tuple(self._gold) if self._gold is not None else None,
            native=self._native_snapshot(),
        )

    def restore(self, snapshot: Snapshot) -> Observation:
        """Go back to ``snapshot``: natively where supported, else reset + replay of its actions."""
        self._check_open()
        self.load(snapshot.spec)
        obs = Observation()
        obs.ParseFromString(snapshot.observation)
        if snapshot.native is not None and self._native_restore(snapshot.native):
            self._seed, self._fold = snapshot.seed, snapshot.fold
            self._history = list(snapshot.actions)
        else:
            self._replay(snapshot.seed, snapshot.fold, snapshot.actions)
        # Keep the exact recorded observation (text of the last step) and gold path.
        self._set_obs(obs)
        self._gold = list(snapshot.gold_path) if snapshot.gold_path is not None else None
        return self.observation()

    def copy(self) -> TextEnv:
        raise NotImplementedError(
            f"{self._spec.scheme} has no native state copy; use snapshot()/restore() (replays the action prefix)"
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> BaseTextEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._spec.canonical()} seed={self._seed} fold={self._fold}>"

    # -- helpers for subclasses -----------------------------------------------------------------
    @property
    def _need_gold(self) -> bool:
        """Whether _reset should have the env compute a gold path (not while replaying)."""
        return self.want_gold_path and not self._replaying

    def _replay(self, seed: int, fold: str, actions: Sequence[str]) -> None:
        """Reset to (seed, fold) and step ``actions`` without checks; keeps the current gold path. No observation
        of the replay is read: each caller sets the one it recorded (`restore`'s, or the state's before a
        refused action), so adapters whose observations cost more than their steps skip them (`_advance`)."""
        gold = self._gold
        self._replaying = True
        try:
            self.reset(seed, fold)
            for a in actions:
                self._advance(a)
                self._history.append(a)
        finally:
            self._replaying = False
            self._gold = gold

    def _advance(self, action: str) -> None:
        """Step ``action`` inside a replay, where its observation is not read."""
        self._step(action)

    def _set_obs(self, obs: Observation) -> None:
        valid = sorted(set(obs.valid_actions))
        del obs.valid_actions[:]
        obs.valid_actions.extend(valid)
        self._obs = obs
        self._valid = frozenset(valid)

    def _current(self) -> Observation:
        self._check_open()
        if self._obs is None:
            raise EnvStateError("no episode yet; call reset(seed, fold) first")
        return self._obs

    def _check_open(self) -> None:
        if self._closed:
            raise EnvStateError(f"{type(self).__name__} is closed")

    def _end_reason(self, obs: Observation) -> str:
        if obs.won:
            return "won"
        if obs.lost:
            return "lost"
        return f"step limit {self.max_steps}" if self.max_steps else "done"

    def _reject(self, action: str, why: str = "") -> InvalidActionError:
        valid = self.valid_actions()
        sample = ", ".join(repr(v) for v in valid[:8]) + (", ..." if len(valid) > 8 else "")
        reason = why or f"not one of the {len(valid)} valid actions"
        return InvalidActionError(
            action,
            f"invalid action {action!r} in {self._spec.canonical()}: {reason} (valid: {sample})",
            valid,
        )

    def _step_unlisted(self, action: str) -> Observation:
        """Strict mode, action not in valid_actions(): reject (ScienceWorld asks its parser first)."""
        raise self._reject(action)

    def _native_snapshot(self) -> Any:
        return None

    def _native_restore(self, native: Any) -> bool:
        return False

    @abc.abstractmethod
    def _load(self, spec: EnvSpec) -> None: ...

    @abc.abstractmethod
    def _reset(self, seed: int, fold: str) -> Observation: ...

    @abc.abstractmethod
    def _step(self, action: str) -> Observation: ...

    @abc.abstractmethod
    def _close(self) -> None: ...


def clamp01(x: float) -> float:
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else float(x)
