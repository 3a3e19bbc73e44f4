"""The scheme ``puzzle:``: ``puzzle:hanoi?disks=3,start=random`` (pyproject.toml's entry point loads ``scheme``)."""

from __future__ import annotations

from evoskill.envs import EnvironmentInfo, EnvScheme, EnvSpec
from evoskill_env_example.hanoi import TowerOfHanoi

DEFAULTS = {"disks": "3", "start": "random"}


def parse(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    """Canonical name and parameters, defaults filled in; a ValueError names what is wrong."""
    if name.strip().lower() not in ("hanoi", "tower-of-hanoi"):
        raise ValueError(f"unknown puzzle {name!r}; accepted: hanoi")
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; accepted parameters: {', '.join(DEFAULTS)}")
    canonical = DEFAULTS | params
    if not canonical["disks"].isdigit() or not 1 <= int(canonical["disks"]) <= 8:
        raise ValueError(f"disks={canonical['disks']!r} must be an integer from 1 to 8")
    if canonical["start"] not in ("random", "classic"):
        raise ValueError(f"start={canonical['start']!r} must be random or classic")
    return "hanoi", canonical


def make_game(spec: EnvSpec) -> TowerOfHanoi:
    return TowerOfHanoi(disks=int(spec.params["disks"]), start=spec.params["start"])


def environments() -> list[EnvironmentInfo]:
    return [EnvironmentInfo("puzzle", "hanoi", "Tower of Hanoi: move every disk to the right peg",
                            tuple(DEFAULTS), ("tower-of-hanoi",), True, "puzzle:hanoi?disks=3")]


scheme = EnvScheme.gym(make_game, parse=parse, description="Classic puzzles (Tower of Hanoi)",
                       environments=environments)
