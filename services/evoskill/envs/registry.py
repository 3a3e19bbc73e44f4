"""Environment schemes: the part before ``:`` in a spec, each a plug-in found by entry point; and what needs
them: :func:`parse_spec`, :func:`located`, :func:`list_environments`.

A package adds a scheme by declaring an entry point in the ``evoskill.envs`` group whose name is the
scheme and whose object is an :class:`EnvScheme` (``pip install`` it and every process of the stack
can play ``scheme:name``). evoskill declares its own three the same way in pyproject.toml; where the
installed metadata predates those declarations (an editable install made earlier), the built-ins come
from :data:`BUILTIN_ENTRY_POINTS`, so they never depend on it. A scheme that fails to load is an error
only when a spec names it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from evoskill.core.errors import Unavailable
from evoskill.envs.spec import EnvironmentInfo, EnvSpec, EnvSpecError, split_params

if TYPE_CHECKING:
    from evoskill.core.search_config import SearchConfig
    from evoskill.envs.base import TextEnv

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "evoskill.envs"
# The built-ins as pyproject.toml declares them (a test keeps the two equal).
BUILTIN_ENTRY_POINTS: dict[str, str] = {
    "twx": "evoskill.envs.schemes:TWX",
    "tw": "evoskill.envs.schemes:TW",
    "sciworld": "evoskill.envs.schemes:SCIWORLD",
    "tools": "evoskill.envs.tools:TOOLS",
    "bfcl": "evoskill.envs.bfcl:BFCL",
}

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\- ().]*$")
_PATH_RE = re.compile(r"^[^?\x00-\x1f\x7f]+$")  # the name of a scheme whose names are file paths

# parse(name, params, validate) -> (canonical name, canonical params); raises ValueError naming the problem.
# validate=False asks for canonical names only, skipping checks that cost (importing a package).
Parse = Callable[[str, dict[str, str], bool], tuple[str, dict[str, str]]]


class EnvUnavailableError(Unavailable):
    """The spec is fine but this machine cannot run it (package or Java runtime missing)."""


def _keep(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    return name, params


@dataclass(frozen=True)
class EnvScheme:
    """What a plug-in declares: how to start a game of the scheme, and optionally how to check a spec.

    ``make(spec, *, strict, max_steps, gold_path, cache_dir, **options) -> TextEnv`` starts the game
    ``spec`` names (``cache_dir``: a folder the stack keeps for generated files, or None). ``parse``
    canonicalises and checks the name and parameters before anything starts (default: kept as given).
    ``environments()`` lists the games for :func:`~evoskill.envs.list_environments`. ``file_names``: the
    name is a file's path (any text without '?'), which ``parse`` makes absolute, and clients send the spec in
    that form (:func:`located`), since services run in folders of their own.
    ``network(spec)``: whether the game reaches hosts outside its process tree (a tool server over HTTP); the
    sandbox runs every other game where no connection leaves its worker (default: none does). ``search``: the
    search settings (``search.*`` names and values) its games are played with where the operator set none
    (:func:`search_settings`).
    """

    make: Callable[..., TextEnv]
    parse: Parse = _keep
    description: str = ""
    aliases: tuple[str, ...] = ()
    environments: Callable[[], list[EnvironmentInfo]] | None = None
    file_names: bool = False
    network: Callable[[EnvSpec], bool] | None = None
    search: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def gym(cls, factory: Callable[[EnvSpec], Any], **fields: Any) -> EnvScheme:
        """A scheme of Gymnasium-style text environments: ``factory(spec)`` makes one, and
        :class:`~evoskill.envs.gym_adapter.GymTextEnv` wraps it."""
        from evoskill.envs.gym_adapter import GymTextEnv

        def make(spec: EnvSpec, *, cache_dir: object = None, **options: Any) -> TextEnv:
            return GymTextEnv(spec, factory, **options)

        return cls(make=make, **fields)


@dataclass(frozen=True)
class _Declared:
    name: str
    scheme: EnvScheme | None
    origin: str  # the distribution that declared it, for messages
    error: str = ""  # why it could not be loaded


class Registry:
    """The schemes in this process, loaded once from the entry points."""

    def __init__(self, declared: Iterable[EntryPoint]) -> None:
        self._schemes: dict[str, _Declared] = {}
        points = list(declared)
        seen = {ep.name for ep in points}
        points += [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in BUILTIN_ENTRY_POINTS.items()
                   if name not in seen]
        for ep in points:
            if ep.name not in self._schemes:  # the first declaration of a name wins (sys.path order)
                self._schemes[ep.name] = _load(ep)
        self._aliases = {name: name for name in self._schemes}
        for name, entry in self._schemes.items():
            for alias in entry.scheme.aliases if entry.scheme else ():
                self._aliases.setdefault(alias.lower(), name)

    def names(self) -> list[str]:
        """Scheme names: the built-ins first, then the plug-ins alphabetically."""
        plugins = sorted(n for n in self._schemes if n not in BUILTIN_ENTRY_POINTS)
        return [n for n in BUILTIN_ENTRY_POINTS if n in self._schemes] + plugins

    def resolve(self, scheme: str) -> tuple[str, EnvScheme]:
        """The canonical name and the scheme ``scheme`` (a name or alias) selects."""
        name = self._aliases.get(scheme.strip().lower())
        if name is None:
            raise EnvSpecError(f"unknown environment scheme {scheme!r}; accepted schemes: {', '.join(self.names())} "
                               f"(more come from packages declaring {ENTRY_POINT_GROUP!r} entry points)")
        entry = self._schemes[name]
        if entry.scheme is None:
            raise EnvSpecError(f"environment scheme {name!r} (from {entry.origin}) could not be loaded: "
                               f"{entry.error}; reinstall or uninstall that package")
        return name, entry.scheme

    def loaded(self) -> list[tuple[str, EnvScheme]]:
        return [(n, e.scheme) for n in self.names() if (e := self._schemes[n]).scheme is not None]


def _load(ep: EntryPoint) -> _Declared:
    origin = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else ep.value
    try:
        obj = ep.load()
    except Exception as exc:  # a broken plug-in must not break the other schemes
        log.warning("environment scheme %r (%s) failed to load", ep.name, origin, exc_info=True)
        return _Declared(ep.name, None, origin, f"{type(exc).__name__}: {exc}")
    if not isinstance(obj, EnvScheme):
        return _Declared(ep.name, None, origin, f"{ep.value} is a {type(obj).__name__}, not an EnvScheme")
    return _Declared(ep.name, obj, origin)


def needs_network(spec: EnvSpec) -> bool:
    """Whether the game ``spec`` (parsed) names reaches hosts outside its process tree (``EnvScheme.network``)."""
    network = scheme_registry().resolve(spec.scheme)[1].network
    return network is not None and network(spec)


def search_settings(spec: str, settings: SearchConfig) -> SearchConfig:
    """`settings` for playing `spec`: its scheme's ``search`` settings wherever the operator (settings file,
    environment variable, ``model_copy``) set none; `settings` as they are for a spec that does not parse (the
    environment says why when it starts)."""
    try:
        declared = scheme_registry().resolve(parse_spec(spec, validate=False).scheme)[1].search
    except EnvSpecError:
        return settings
    unset = {name: value for name, value in declared if name not in settings.model_fields_set}
    return settings.model_copy(update=unset) if unset else settings


@functools.cache
def scheme_registry() -> Registry:
    """The process's registry (entry points are read once; ``scheme_registry.cache_clear()`` rereads them)."""
    return Registry(entry_points(group=ENTRY_POINT_GROUP))


def _schemes() -> str:
    return ", ".join(scheme_registry().names())


def parse_spec(spec: str | EnvSpec, *, validate: bool = True) -> EnvSpec:
    """Parse ``scheme:name?k=v,k=v`` into an :class:`EnvSpec` with canonical names.

    Raises :class:`EnvSpecError` naming the problem and listing what is accepted. The scheme (a
    built-in or a plug-in) canonicalises and, with ``validate`` (default), checks name and parameters:
    TextWorldExpress params against the game's known properties (integers), TextWorld options against
    ``tw-make``'s parser (when TextWorld is installed), ScienceWorld params against its simplifications.
    """
    if isinstance(spec, EnvSpec):
        spec = spec.canonical()
    if not isinstance(spec, str) or not spec.strip():
        raise EnvSpecError(f"empty environment spec; expected scheme:name, scheme one of {_schemes()}")
    text = spec.strip()
    if ":" not in text:
        raise EnvSpecError(
            f"environment spec {text!r} has no scheme; expected scheme:name[?k=v,...] with scheme one of "
            f"{_schemes()} (e.g. twx:coin, tw:custom?world_size=3, sciworld:boil)"
        )
    scheme_raw, rest = text.split(":", 1)
    scheme, entry = scheme_registry().resolve(scheme_raw)
    name_raw, _, query = rest.partition("?")
    name_raw = name_raw.strip()
    if not name_raw or not (_PATH_RE if entry.file_names else _NAME_RE).match(name_raw):
        raise EnvSpecError(f"missing or malformed name {name_raw!r} in spec {text!r}")
    params = split_params(text, query)
    try:
        name, canonical = entry.parse(name_raw, params, validate)
    except EnvSpecError:
        raise
    except ValueError as exc:  # a plug-in's parse names the problem; the spec says where
        raise EnvSpecError(f"{scheme}:{name_raw}: {exc}") from exc
    return EnvSpec(scheme, name, dict(canonical))


def located(spec: str) -> str:
    """``spec`` as a service running in another folder reads it: where the scheme's names are file paths, the
    canonical spec (the path made absolute); any other spec as given (a bad one too: its checker says why)."""
    try:
        parsed = parse_spec(spec, validate=False)
        file_names = scheme_registry().resolve(parsed.scheme)[1].file_names
    except EnvSpecError:
        return spec
    return parsed.canonical() if file_names else spec


def list_environments() -> list[EnvironmentInfo]:
    """What can be selected by a spec, every scheme's (plug-ins too), for the CLI and the README.
    Starts no JVM; a plug-in without a listing appears as one line, its description."""
    out: list[EnvironmentInfo] = []
    for name, scheme in scheme_registry().loaded():
        if scheme.environments is not None:
            out += scheme.environments()
        else:
            out.append(EnvironmentInfo(name, "", scheme.description, aliases=scheme.aliases))
    return out


def describe_environments() -> str:
    """A plain-text table of :func:`list_environments`."""
    lines: list[str] = []
    for info in list_environments():
        extra = f" params: {', '.join(info.params)}" if info.params else ""
        avail = "" if info.available else " (not installed)"
        lines.append(f"{info.scheme + ':' + info.name:<52} {info.description}{avail}{extra}")
    return "\n".join(lines)
