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

# Readable aliases accepted for the scheme part.
SCHEME_ALIASES: dict[str, str] = {
    "twx": "twx",
    "textworldexpress": "twx",
    "textworld-express": "twx",
    "textworld_express": "twx",
    "tw": "tw",
    "textworld": "tw",
    "sciworld": "sciworld",
    "scienceworld": "sciworld",
    "sw": "sciworld",
}
SCHEMES: tuple[str, ...] = ("twx", "tw", "sciworld")

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


def parse_spec(spec: str | EnvSpec, *, validate: bool = True) -> EnvSpec:
    """Parse ``scheme:name?k=v,k=v`` into an :class:`EnvSpec` with canonical names.

    Raises :class:`EnvSpecError` naming the problem and listing what is accepted. With
    ``validate`` (default) the parameters are checked too: TextWorldExpress params against the
    game's known properties (integers), TextWorld options against ``tw-make``'s parser (when
    TextWorld is installed), ScienceWorld params against its simplifications.
    """
    if isinstance(spec, EnvSpec):
        spec = spec.canonical()
    if not isinstance(spec, str) or not spec.strip():
        raise EnvSpecError(f"empty environment spec; expected scheme:name, scheme one of {', '.join(SCHEMES)}")
    text = spec.strip()
    if ":" not in text:
        raise EnvSpecError(
            f"environment spec {text!r} has no scheme; expected scheme:name[?k=v,...] with scheme one of "
            f"{', '.join(SCHEMES)} (e.g. twx:coin, tw:custom?world_size=3, sciworld:boil)"
        )
    scheme_raw, rest = text.split(":", 1)
    scheme = SCHEME_ALIASES.get(scheme_raw.strip().lower())
    if scheme is None:
        raise EnvSpecError(f"unknown environment scheme {scheme_raw!r}; accepted schemes: {', '.join(SCHEMES)}")
    name_raw, _, query = rest.partition("?")
    name_raw = name_raw.strip()
    if not name_raw or not _NAME_RE.match(name_raw):
        raise EnvSpecError(f"missing or malformed name {name_raw!r} in spec {text!r}")
    params = _split_params(text, query)
    if scheme == "twx":
        return _twx_spec(name_raw, params, validate)
    if scheme == "tw":
        return _tw_spec(name_raw, params, validate)
    return _sw_spec(name_raw, params, validate)


def _twx_spec(name: str, params: dict[str, str], validate: bool) -> EnvSpec:
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
    return EnvSpec("twx", game, dict(params))


def _tw_spec(name: str, params: dict[str, str], validate: bool) -> EnvSpec:
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
    spec = EnvSpec("tw", generator, norm_params)
    if validate:
        from evoskill.envs.textworld_env import validate_tw_options  # lazy: imports textworld

        validate_tw_options(spec)
    return spec


def _sw_spec(name: str, params: dict[str, str], validate: bool) -> EnvSpec:
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
    return EnvSpec("sciworld", task, out)


def list_environments() -> list[EnvironmentInfo]:
    """What can be selected by a spec, for ``--help`` and the README. Starts no JVM."""
    from evoskill.envs.scienceworld_env import scienceworld_available, sciworld_tasks
    from evoskill.envs.textworld_env import textworld_available

    out: list[EnvironmentInfo] = []
    for game, params in TWX_GAMES.items():
        aliases = tuple(sorted(a for a, g in TWX_ALIASES.items() if g == game and a != game))
        out.append(EnvironmentInfo("twx", game, TWX_DESCRIPTIONS[game], params, aliases, True, f"twx:{game}"))
    tw_ok = textworld_available()
    examples = {
        "custom": "tw:custom?world_size=3,nb_objects=5,quest_length=3",
        "tw-coin_collector": "tw:tw-coin_collector?level=5",
        "tw-treasure_hunter": "tw:tw-treasure_hunter?level=1",
        "tw-cooking": "tw:tw-cooking?recipe=1,take=1,go=1,open=1,cook=1,cut=1",
        "tw-simple": "tw:tw-simple?rewards=dense,goal=detailed",
    }
    for gen, desc in TW_GENERATORS.items():
        aliases = tuple(sorted(a for a, g in TW_ALIASES.items() if g == gen and a != gen))
        out.append(EnvironmentInfo("tw", gen, desc, (), aliases, tw_ok, examples[gen]))
    sw_ok = scienceworld_available()
    for task_id, task, title in sciworld_tasks():
        out.append(EnvironmentInfo("sciworld", task, title, SW_SIMPLIFICATIONS, (task_id,), sw_ok, f"sciworld:{task}"))
    return out


def describe_environments() -> str:
    """A plain-text table of :func:`list_environments` for ``--help``."""
    lines: list[str] = []
    for info in list_environments():
        extra = f" params: {', '.join(info.params)}" if info.params else ""
        avail = "" if info.available else " (not installed)"
        lines.append(f"{info.scheme}:{info.name:<48} {info.description}{avail}{extra}")
    return "\n".join(lines)
