"""Environment specs' data: :class:`EnvSpec`, :class:`EnvSpecError`, :class:`EnvironmentInfo`, the folds and
their seeds, the built-in schemes' tables (TWX games, TextWorld generators, ScienceWorld simplifications) and the
splitting of a spec's parameters.

Imports nothing of ``evoskill.envs``, so every module there can use it: parsing a whole spec needs the schemes
(:func:`evoskill.envs.registry.parse_spec`), and the built-ins' parsers are in :mod:`evoskill.envs.schemes`. See
the package docstring for the grammar and the accepted names.
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
# Keys are normalised (lower case, without '-', '_' and spaces) before lookup (schemes.parse_twx).
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
# ScienceWorld's boolean spec parameters of evoskill's own: `shown_names` lists each object as the room shows it
# (envs/scienceworld_names.py).
SW_OPTIONS: tuple[str, ...] = ("shown_names",)
SW_PARAMS: tuple[str, ...] = (*SW_SIMPLIFICATIONS, *SW_OPTIONS)  # every boolean parameter a sciworld: spec takes

TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
FALSE_VALUES = frozenset({"0", "false", "no", "off"})
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


class EnvSpecError(InvalidInput):
    """A spec string names an unknown scheme, game or task, or carries a malformed parameter."""


def parse_bool(value: str, *, key: str = "value") -> bool:
    v = value.strip().lower()
    if v in TRUE_VALUES:
        return True
    if v in FALSE_VALUES:
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
    """One entry of :func:`~evoskill.envs.list_environments`."""

    scheme: str
    name: str
    description: str
    params: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    available: bool = True
    example: str = ""


def split_params(spec: str, query: str) -> dict[str, str]:
    """The parameters of ``query`` (what follows ``?`` in ``spec``), checked for form only: the scheme checks them."""
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
        if _CONTROL_RE.search(value):
            raise EnvSpecError(f"parameter {key!r} in {spec!r} has a control character in its value")
        if key in params:
            raise EnvSpecError(f"parameter {key!r} given twice in {spec!r}")
        params[key] = value
    return params
