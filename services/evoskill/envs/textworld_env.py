"""TextWorld adapter (``tw:<generator>?k=v``): games made offline with ``tw-make``, cached on disk.

Generation runs the venv's ``tw-make`` (next to ``sys.executable``) once per
(generator, options, game seed, textworld version); the game files are kept under the cache dir
(default ``.evoskill/cache/textworld/``) so the same options never regenerate. Options are checked
against ``tw-make``'s own argument parser before anything is generated.
"""

from __future__ import annotations

import argparse
import contextlib
import copy as _copy
import functools
import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Unpack

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.errors import InvalidInput
from evoskill.envs.base import AdapterOptions, BaseTextEnv, TemplateMatcher, clamp01
from evoskill.envs.spec import (
    FOLD_SEED_SPAN,
    FOLDS,
    TW_RESERVED_OPTIONS,
    EnvSpec,
    EnvSpecError,
    fold_seed,
    parse_bool,
)

DEFAULT_CACHE_DIR = Path(".evoskill") / "cache" / "textworld"

# tw-cooking has its own food/preparation splits; a fold selects the matching one unless split= is given.
COOKING_SPLIT: dict[str, str] = {"train": "train", "dev": "valid", "test": "test"}

# TextWorld's command templates (default knowledge base + the cooking challenge), so that
# template() is the same before and after a game is loaded; each game's own list is added on reset.
TW_BASE_TEMPLATES: tuple[str, ...] = (
    "chop {f} with {o}",
    "close {c}",
    "close {d}",
    "cook {f} with {oven}",
    "cook {f} with {stove}",
    "cook {f} with {toaster}",
    "dice {f} with {o}",
    "drink {f}",
    "drop {o}",
    "eat {f}",
    "examine {o}",
    "go east",
    "go north",
    "go south",
    "go west",
    "insert {o} into {c}",
    "inventory",
    "lock {c} with {k}",
    "look",
    "open {c}",
    "prepare meal",
    "put {o} on {s}",
    "slice {f} with {o}",
    "take {o}",
    "take {o} from {c}",
    "unlock {c} with {k}",
)

_BANNER_LINE = re.compile(r"^[\s_|\\$/<>]*[_|\\$][\s_|\\$/<>]*$")
_PROMPT_LINE = re.compile(r"^\s*>(\s|$)")


def textworld_available() -> bool:
    return importlib.util.find_spec("textworld") is not None


def tw_make_path() -> Path:
    """``tw-make`` of the running interpreter's environment (found next to sys.executable)."""
    candidate = Path(sys.executable).parent / "tw-make"
    if candidate.is_file():
        return candidate
    found = shutil.which("tw-make")
    if found:
        return Path(found)
    raise RuntimeError(f"tw-make not found next to {sys.executable} nor on PATH; install textworld")


@functools.cache
def _tw_make_parsers() -> dict[str, argparse.ArgumentParser]:
    """The sub-parsers of ``tw-make`` (custom + every registered challenge), by generator name."""
    path = tw_make_path()
    loader = importlib.machinery.SourceFileLoader("_evoskill_tw_make", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    parser = module.build_parser(default_parser_only=True)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise RuntimeError("tw-make has no sub-commands")


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    out: dict[str, argparse.Action] = {}
    for action in parser._actions:
        for opt in action.option_strings:
            if opt.startswith("--"):
                key = opt[2:].replace("-", "_")
                if key not in TW_RESERVED_OPTIONS:
                    out[key] = action
    return out


@functools.cache
def tw_themes() -> tuple[str, ...]:
    """The text grammars installed with TextWorld (``--theme``): the names their ``NAME_*.twg`` files start with."""
    from textworld.generator import KnowledgeBase

    folder = Path(KnowledgeBase.default().text_grammars_path)
    return tuple(sorted({p.name.split("_", 1)[0] for p in folder.glob("*.twg")}))


def tw_make_argv(spec: EnvSpec, fold: str | None = None) -> list[str]:
    """``tw-make`` arguments for ``spec`` (without --seed/--output), checked by tw-make's parser.

    Boolean options (``open``, ``cook``, ``include_adj``, ...) take 1/0; with ``fold`` given,
    tw-cooking gets ``--split`` from the fold unless ``split`` is set in the spec.
    """
    parsers = _tw_make_parsers()
    sub = parsers.get(spec.name)
    if sub is None:
        raise EnvSpecError(f"unknown TextWorld generator {spec.name!r}; tw-make accepts: {', '.join(parsers)}")
    options = _options(sub)
    argv: list[str] = []
    for key in sorted(spec.params):
        value = spec.params[key]
        action = options.get(key)
        if action is None:
            raise EnvSpecError(
                f"unknown option {key!r} for tw:{spec.name}; accepted: {', '.join(sorted(options)) or 'none'}"
            )
        if key == "theme" and value not in tw_themes():  # tw-make reads a file named after it
            raise EnvSpecError(f"parameter theme={value!r} for tw:{spec.name} is not an installed theme; accepted: "
                               f"{', '.join(tw_themes())}")
        flag = "--" + key.replace("_", "-")
        if flag not in action.option_strings:
            flag = next(o for o in action.option_strings if o.startswith("--"))
        if action.nargs == 0:  # store_true
            if parse_bool(value, key=key):
                argv.append(flag)
        else:
            argv += [flag, value]
    if fold is not None and spec.name == "tw-cooking" and "split" not in spec.params:
        argv += ["--split", COOKING_SPLIT[fold]]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            sub.parse_args([*argv, "--seed", "0", "--output", "game.z8"])
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().strip().splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {exc.code}"
        why = why.split("error:", 1)[-1].strip()
        raise EnvSpecError(
            f"bad options for tw:{spec.name}: {why}; accepted: {', '.join(sorted(options)) or 'none'}"
        ) from None
    return argv


def validate_tw_options(spec: EnvSpec) -> None:
    """Check ``spec``'s options with tw-make's parser (skipped when TextWorld is not installed)."""
    if textworld_available():
        tw_make_argv(spec)


def _textworld_version() -> str:
    import textworld

    return str(getattr(textworld, "__version__", "unknown"))


class NoQuestAtSeed(EnvSpecError):
    """tw-make's map at this seed has no room for a quest of the asked length (QuestGenerationError)."""


# Where tw-make finds no quest at a task's game seed, the task plays the first of these shifts of it (within the
# fold's range: seed + shift modulo the span) that has one: deterministic, and never another fold's game. At
# treasure_hunter level 10 about 30% of seeds have none: 15 shifts leave a task without a game ~1e-8 of the time.
NO_QUEST_SHIFTS = tuple(k * 499_979 % FOLD_SEED_SPAN for k in range(1, 16))


def game_dir(cache_dir: Path, generator: str, argv: list[str], game_seed: int) -> Path:
    """Where the game for (generator, tw-make options, seed) lives in the cache."""
    key = json.dumps({"generator": generator, "argv": argv, "textworld": _textworld_version()}, sort_keys=True)
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", "_".join(a.lstrip("-") for a in argv))[:60] or "default"
    return cache_dir / generator / f"{slug}-{digest}" / f"seed-{game_seed}"


def ensure_game(
    generator: str, argv: list[str], game_seed: int, cache_dir: Path, *, timeout: float = 600.0
) -> tuple[Path, bool]:
    """Path of the cached ``game.z8``, generating it with tw-make first if needed.

    Returns (path, generated). Generation writes to a temporary folder renamed into place, so
    concurrent workers never see half-written games and a lost race only wastes one generation.
    """
    # Absolute: tw-make runs in a temporary working directory, where a relative --output would land elsewhere.
    final = game_dir(cache_dir.resolve(), generator, argv, game_seed)
    game, no_quest = final / "game.z8", final.with_name(f"{final.name}.no-quest")
    if game.is_file() and (final / "game.json").is_file():
        return game, False
    if no_quest.is_file():  # tw-make said so once: it says so every time (seconds a try)
        raise NoQuestAtSeed(no_quest.read_text())
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared by workers
    cmd = [
        sys.executable,
        str(tw_make_path()),
        generator,
        *argv,
        "--seed",
        str(game_seed),
        "--output",
        str(tmp / "game.z8"),
        "--silent",
        "-f",
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp, check=False)
        if proc.returncode != 0 or not (tmp / "game.z8").is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-2:]
            options = " ".join(argv)
            message = f"tw-make could not generate tw:{generator} {options} --seed {game_seed}: {' | '.join(tail)}"
            if "QuestGenerationError" in (proc.stderr or proc.stdout):
                no_quest.write_text(message)
                raise NoQuestAtSeed(message)
            raise EnvSpecError(message)
        (tmp / "key.json").write_text(
            json.dumps(
                {"generator": generator, "argv": argv, "seed": game_seed, "textworld": _textworld_version()},
                indent=1,
            )
        )
        try:
            os.rename(tmp, final)
        except OSError:
            if not game.is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if not game.is_file():
            with contextlib.suppress(OSError):
                final.parent.rmdir()  # only if empty: nothing was ever generated for these options
    return game, True


@contextlib.contextmanager
def _quiet_jericho() -> Iterator[None]:
    """Jericho warns that TextWorld games are 'not fully supported'; TextWorld's wrappers fill the gaps."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Game .* is not fully supported")
        yield


def _clean_text(text: str) -> str:
    lines = [ln for ln in str(text).splitlines() if not _BANNER_LINE.match(ln) and not _PROMPT_LINE.match(ln)]
    return "\n".join(lines).strip()


class TextWorldAdapter(BaseTextEnv):
    """TextWorld games generated offline with tw-make, played through TextWorld's Jericho backend.

    Folds: ``reset(seed, fold)`` plays the game generated with ``--seed OFFSET[fold] + seed % 10**6``
    (train 0..999999, dev 1000000.., test 2000000..); tw-cooking additionally uses
    ``--split train|valid|test`` for train|dev|test unless ``split`` is given in the spec.
    Native copy: ``copy()`` uses TextWorld's ``env.copy()``; ``snapshot()/restore()`` save and put back the
    Z-machine's and the wrappers' state on the same env (textworld_state).
    """

    scheme = "tw"
    native_copy = True

    def __init__(
        self,
        spec: EnvSpec,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        generate_timeout: float = 600.0,
        **options: Unpack[AdapterOptions],
    ) -> None:
        super().__init__(spec, **options)
        import textworld

        self._textworld = textworld
        self.cache_dir = (Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE_DIR).resolve()
        self.generate_timeout = generate_timeout
        self.generated = 0  # games this adapter had to generate (cache misses)
        self._env: Any = None
        self._game_path: Path | None = None
        self._matcher = TemplateMatcher(TW_BASE_TEMPLATES, r"\{[^}]*\}")
        tw_make_argv(self._spec)  # fail early on bad options

    @staticmethod
    def game_seed(seed: int, fold: str, attempt: int = 0) -> int:
        """tw-make's --seed for (seed, fold): each fold its own range of games; `attempt` > 0: the
        NO_QUEST_SHIFTS fallback, in the same fold's range."""
        return fold_seed(seed + (NO_QUEST_SHIFTS[attempt - 1] if attempt else 0), fold)

    def game_file(self, seed: int, fold: str) -> Path:
        """The cached game file for (seed, fold), generated if missing; where tw-make has no quest at the
        seed's game (its map too small for the quest's length), the first shifted seed that has one."""
        if fold not in FOLDS:
            raise InvalidInput(f"unknown fold {fold!r}; accepted folds: {', '.join(FOLDS)}")
        argv = tw_make_argv(self._spec, fold)
        attempts = range(len(NO_QUEST_SHIFTS) + 1)
        for attempt in attempts:
            try:
                path, generated = ensure_game(self._spec.name, argv, self.game_seed(seed, fold, attempt),
                                              self.cache_dir, timeout=self.generate_timeout)
                break
            except NoQuestAtSeed:
                if attempt == attempts[-1]:
                    raise
        self.generated += int(generated)
        return path

    def _infos(self) -> Any:
        return self._textworld.EnvInfos(
            feedback=True,
            description=True,
            inventory=True,
            objective=True,
            score=True,
            max_score=True,
            won=True,
            lost=True,
            admissible_commands=True,
            policy_commands=True,
            command_templates=True,
            extras=["walkthrough"],
        )

    def _load(self, spec: EnvSpec) -> None:
        tw_make_argv(spec)

    def _reset(self, seed: int, fold: str) -> Observation:
        path = self.game_file(seed, fold)
        with _quiet_jericho():
            if self._env is None:
                self._env = self._textworld.start(str(path), request_infos=self._infos())
            elif path != self._game_path:
                self._env.load(str(path))
        self._game_path = path
        state = self._env.reset()
        self._matcher.add(state.get("command_templates") or [])
        if self._need_gold:
            gold = state.get("policy_commands") or state.get("extra.walkthrough") or []
            self._gold = [str(a) for a in gold]
        else:
            self._gold = None
        return self._to_obs(state)

    def _step(self, action: str) -> Observation:
        state, _score, _done = self._env.step(action)
        return self._to_obs(state)

    def _to_obs(self, state: Any) -> Observation:
        max_score = float(state.get("max_score") or 0.0)
        score = float(state.get("score") or 0.0)
        won = bool(state.get("won", False))
        lost = bool(state.get("lost", False))
        return Observation(
            text=_clean_text(state.get("feedback", "")),
            goal=str(state.get("objective", "")),
            valid_actions=[str(a) for a in state.get("admissible_commands") or []],
            score=clamp01(score / max_score) if max_score > 0 else (1.0 if won else 0.0),
            done=won or lost,
            won=won,
            lost=lost,
            inventory=str(state.get("inventory", "")).strip(),
            look=str(state.get("description", "")).strip(),
        )

    def template(self, action: str) -> str:
        return self._matcher(action)

    @property
    def templates(self) -> list[str]:
        """Every slot template known so far (TextWorld's base list plus the loaded games')."""
        return self._matcher.templates

    def copy(self) -> TextWorldAdapter:
        """An independent adapter at the same state (TextWorld's native ``env.copy()``)."""
        self._current()
        other = _copy.copy(self)
        with _quiet_jericho():
            other._env = self._env.copy()
        other._history = list(self._history)
        other._obs = self.observation()
        other._gold = list(self._gold) if self._gold is not None else None
        other._closed = False
        return other

    def _native_snapshot(self) -> Any:
        """The env's state in place (textworld_state), or a whole ``env.copy()`` where its wrappers are not
        TextWorld's usual ones."""
        if self._env is None:
            return None
        from evoskill.envs.textworld_state import capture

        saved = capture(self._env)
        if saved is not None:
            return saved
        with _quiet_jericho():
            return (self._env.copy(), self._game_path)

    def _native_restore(self, native: Any) -> bool:
        from evoskill.envs.textworld_state import TextWorldState, apply

        if isinstance(native, TextWorldState):
            if self._env is None or not apply(self._env, native):
                return False  # the base class replays the snapshot's actions instead
            self._game_path = Path(native.gamefile)
            return True
        env, path = native
        old = self._env
        with _quiet_jericho():
            self._env = env.copy()
        self._game_path = path
        if old is not None and old is not self._env:
            old.close()
        return True

    def _close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
