"""Environment spec strings: ``scheme:name?key=value,key=value``.

Parsing is cheap and starts no JVM; TextWorld generator options are checked against
``tw-make``'s own argument parser when TextWorld is installed. See the package docstring
for the grammar and the accepted names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evoskill.core.errors import InvalidInput

FOLDS: tuple[str, ...] = ("train", "dev", "test")

# reset(seed, fold) of a scheme without folds of its own (TextWorld, Gymnasium-style plug-ins) plays the
# game seed FOLD_SEED_OFFSET[fold] + seed % FOLD_SEED_SPAN: disjoint ranges, so no test game is trained on.
FOLD_SEED_SPAN = 1_000_000
FOLD_SEED_OFFSET: dict[str, int] = {"train": 0, "dev": 1_000_000, "test": 2_000_000}


def fold_seed(seed: int, fold: str) -> int:
    return FOLD_SEED_OFFSET[fold] + seed % FOLD_SEED_SPAN

# TextWorldExpress games and the gameParams each accepts (checked against textworld-express 1.1.0:
# the JVM's "Known properties" answer to an unknown property). All values are integers.
TWX_GAMES: dict[str, tuple[str, ...]] = {
    "cookingworld": (
        "numLocations",
        "numIngredients",
        "numDistractorItems",
        "includeDoors",
        "limitInventorySize",
    ),
    "coin": ("numLocations", "numDistractorItems", "includeDoors", "limitInventorySize"),
    "twc": ("numLocations", "numItemsToPutAway", "includeDoors", "limitInventorySize"),
    "mapreader": (
        "numLocations",
        "maxDistanceApart",
        "maxDistractorItemsPerLocation",
        "includeDoors",
        "limitInventorySize",
    ),
    "arithmetic": (),
    "sorting": (),
    "simonsays": ("gameLength", "numDistractors", "memorization", "verbose"),
    "peckingorder": (),
}
TWX_DESCRIPTIONS: dict[str, str] = {
    "cookingworld": "CookingWorld: find the recipe's ingredients, prepare them, cook the meal",
    "coin": "CoinCollector: navigate the house and take the coin",
    "twc": "TextWorld Commonsense: put objects away in their usual places",
    "mapreader": "MapReader: use a map to fetch the coin and put it in the box",
    "arithmetic": "Arithmetic: solve the math problem, put the matching quantity in the box",
    "sorting": "Sorting: put objects in the box by increasing quantity",
    "simonsays": "SimonSays: do exactly what Simon says",
    "peckingorder": "PeckingOrder: follow the instructions book in order",
}
# Keys are normalised (lower case, without '-', '_' and spaces) before lookup.
TWX_ALIASES: dict[str, str] = {
    "cookingworld": "cookingworld",
    "cooking": "cookingworld",
    "coin": "coin",
    "coincollector": "coin",
    "twc": "twc",
    "textworldcommonsense": "twc",
    "commonsense": "twc",
    "mapreader": "mapreader",
    "map": "mapreader",
    "arithmetic": "arithmetic",
    "sorting": "sorting",
    "simonsays": "simonsays",
    "simon": "simonsays",
    "peckingorder": "peckingorder",
}

# TextWorld generators: ``custom`` plus the challenges shipped with textworld 1.7.0.
TW_GENERATORS: dict[str, str] = {
    "custom": "custom game: world_size, nb_objects, quest_length, quest_breadth, theme, ...",
    "tw-coin_collector": "Coin Collector challenge (level=1..300)",
    "tw-treasure_hunter": "Treasure Hunter challenge (level=1..30)",
    "tw-cooking": "Cooking challenge (recipe, take, go, open, cook, cut, drop, split, recipe_seed)",
    "tw-simple": "Simple game (rewards=dense|balanced|sparse, goal=detailed|brief|none, test)",
}
TW_ALIASES: dict[str, str] = {
    "custom": "custom",
    "coincollector": "tw-coin_collector",
    "twcoincollector": "tw-coin_collector",
    "treasurehunter": "tw-treasure_hunter",
    "twtreasurehunter": "tw-treasure_hunter",
    "cooking": "tw-cooking",
    "twcooking": "tw-cooking",
    "simple": "tw-simple",
    "twsimple": "tw-simple",
}
# tw-make options that the adapter owns (cache path, seed) or that make no sense here.
TW_RESERVED_OPTIONS: frozenset[str] = frozenset(
    {
        "output",
        "seed",
        "format",
        "overview",
        "save_overview",
        "force",
        "silent",
        "verbose",
        "third_party",
        "help",
    }
)

# ScienceWorld simplifications (scienceworld 1.2.3), each a boolean spec parameter.
SW_SIMPLIFICATIONS: tuple[str, ...] = (
    "easy",
    "teleportAction",
    "selfWateringFlowerPots",
    "openContainers",
    "openDoors",
    "noElectricalAction",
)

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\- ().]*$")
_PATH_RE = re.compile(r"^[^?\x00]+$")  # the name of a scheme whose names are file paths


class EnvSpecError(InvalidInput):
    """A spec string names an unknown scheme, game or task, or carries a malformed parameter."""


def parse_bool(value: str, *, key: str = "value") -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise EnvSpecError(f"parameter {key}={value!r} is not a boolean; use one of 1/0, true/false, yes/no")


@dataclass(frozen=True)
class EnvSpec:
    """A parsed environment spec: ``scheme``, canonical ``name`` and ``params`` (string values)."""

    scheme: str
    name: str
    params: dict[str, str] = field(default_factory=dict)

    def canonical(self) -> str:
        """``scheme:name`` plus ``?k=v,...`` with keys sorted; parse_spec(canonical()) == self."""
        base = f"{self.scheme}:{self.name}"
        if not self.params:
            return base
        return base + "?" + ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))

    def __str__(self) -> str:
        return self.canonical()

    def __hash__(self) -> int:
        return hash(self.canonical())


@dataclass(frozen=True)
class EnvironmentInfo:
    """One entry of :func:`list_environments`."""

    scheme: str
    name: str
    description: str
    params: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    available: bool = True
    example: str = ""


def _norm(name: str) -> str:
    return re.sub(r"[-_\s]", "", name.strip().lower())


def _split_params(spec: str, query: str) -> dict[str, str]:
    params: dict[str, str] = {}
    if not query.strip():
        return params
    for raw in re.split(r"[,&]", query):
        item = raw.strip()
        if not item:
            raise EnvSpecError(f"empty parameter in {spec!r}; write key=value pairs separated by ','")
        if "=" not in item:
            raise EnvSpecError(f"parameter {item!r} in {spec!r} has no '='; write key=value")
        key, value = (s.strip() for s in item.split("=", 1))
        if not _KEY_RE.match(key):
            raise EnvSpecError(f"bad parameter name {key!r} in {spec!r}; names are letters, digits, '_' or '-'")
        if not value:
            raise EnvSpecError(f"parameter {key!r} in {spec!r} has an empty value")
        if key in params:
            raise EnvSpecError(f"parameter {key!r} given twice in {spec!r}")
        params[key] = value
    return params


def _schemes() -> str:
    from evoskill.envs.registry import scheme_registry  # lazy: the registry imports this module

    return ", ".join(scheme_registry().names())


def parse_spec(spec: str | EnvSpec, *, validate: bool = True) -> EnvSpec:
    """Parse ``scheme:name?k=v,k=v`` into an :class:`EnvSpec` with canonical names.

    Raises :class:`EnvSpecError` naming the problem and listing what is accepted. The scheme (a
    built-in or a plug-in, see :mod:`evoskill.envs.registry`) canonicalises and, with ``validate``
    (default), checks name and parameters: TextWorldExpress params against the game's known
    properties (integers), TextWorld options against ``tw-make``'s parser (when TextWorld is
    installed), ScienceWorld params against its simplifications.
    """
    from evoskill.envs.registry import scheme_registry

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
    params = _split_params(text, query)
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
    from evoskill.envs.registry import scheme_registry

    try:
        parsed = parse_spec(spec, validate=False)
        file_names = scheme_registry().resolve(parsed.scheme)[1].file_names
    except EnvSpecError:
        return spec
    return parsed.canonical() if file_names else spec


def parse_twx(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    game = TWX_ALIASES.get(_norm(name))
    if game is None:
        raise EnvSpecError(
            f"unknown TextWorldExpress game {name!r}; accepted: {', '.join(TWX_GAMES)} "
            f"(aliases: coincollector, cooking, commonsense, simon, ...)"
        )
    if validate:
        known = TWX_GAMES[game]
        for key, value in params.items():
            if key not in known:
                accepted = ", ".join(known) if known else "none"
                raise EnvSpecError(f"unknown parameter {key!r} for twx:{game}; accepted parameters: {accepted}")
            if not re.fullmatch(r"-?\d+", value):
                raise EnvSpecError(f"parameter {key}={value!r} for twx:{game} must be an integer")
    return game, dict(params)


def parse_tw(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    key = _norm(name)
    generator = name.strip().lower() if name.strip().lower() in TW_GENERATORS else TW_ALIASES.get(key)
    if generator is None:
        raise EnvSpecError(f"unknown TextWorld generator {name!r}; accepted: {', '.join(TW_GENERATORS)}")
    norm_params = {k.replace("-", "_"): v for k, v in params.items()}
    for k in norm_params:
        if k in TW_RESERVED_OPTIONS:
            raise EnvSpecError(
                f"parameter {k!r} is set by the adapter for tw:{generator} (seed and output come from "
                f"reset(seed, fold) and the cache dir); remove it"
            )
    if validate:
        from evoskill.envs.textworld_env import validate_tw_options  # lazy: imports textworld

        validate_tw_options(EnvSpec("tw", generator, norm_params))
    return generator, norm_params


def parse_sciworld(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    from evoskill.envs.scienceworld_env import resolve_task  # lazy: reads scienceworld's task table

    task = resolve_task(name)
    out: dict[str, str] = {}
    lower = {s.lower(): s for s in SW_SIMPLIFICATIONS}
    for key, value in params.items():
        canon = lower.get(key.lower())
        if canon is None:
            raise EnvSpecError(
                f"unknown parameter {key!r} for sciworld:{task}; accepted boolean parameters: "
                f"{', '.join(SW_SIMPLIFICATIONS)}"
            )
        out[canon] = "1" if (parse_bool(value, key=key) if validate else value not in _FALSE) else "0"
    return task, out


def twx_environments() -> list[EnvironmentInfo]:
    out: list[EnvironmentInfo] = []
    for game, params in TWX_GAMES.items():
        aliases = tuple(sorted(a for a, g in TWX_ALIASES.items() if g == game and a != game))
        out.append(EnvironmentInfo("twx", game, TWX_DESCRIPTIONS[game], params, aliases, True, f"twx:{game}"))
    return out


def tw_environments() -> list[EnvironmentInfo]:
    from evoskill.envs.textworld_env import textworld_available

    tw_ok = textworld_available()
    examples = {
        "custom": "tw:custom?world_size=3,nb_objects=5,quest_length=3",
        "tw-coin_collector": "tw:tw-coin_collector?level=5",
        "tw-treasure_hunter": "tw:tw-treasure_hunter?level=1",
        "tw-cooking": "tw:tw-cooking?recipe=1,take=1,go=1,open=1,cook=1,cut=1",
        "tw-simple": "tw:tw-simple?rewards=dense,goal=detailed",
    }
    out: list[EnvironmentInfo] = []
    for gen, desc in TW_GENERATORS.items():
        aliases = tuple(sorted(a for a, g in TW_ALIASES.items() if g == gen and a != gen))
        out.append(EnvironmentInfo("tw", gen, desc, (), aliases, tw_ok, examples[gen]))
    return out


def sciworld_environments() -> list[EnvironmentInfo]:
    from evoskill.envs.scienceworld_env import scienceworld_available, sciworld_tasks

    sw_ok = scienceworld_available()
    return [EnvironmentInfo("sciworld", task, title, SW_SIMPLIFICATIONS, (task_id,), sw_ok, f"sciworld:{task}")
            for task_id, task, title in sciworld_tasks()]


def list_environments() -> list[EnvironmentInfo]:
    """What can be selected by a spec, every scheme's (plug-ins too), for the CLI and the README.
    Starts no JVM; a plug-in without a listing appears as one line, its description."""
    from evoskill.envs.registry import scheme_registry

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
