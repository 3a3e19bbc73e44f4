"""The ``bfcl:`` scheme: BFCL's multi-turn categories, played on its own API simulations and scored by its own
checker (docs/bfcl.md).

``bfcl:CATEGORY[?entry=ID]``: ``multi_turn_base``, ``multi_turn_miss_func``, ``multi_turn_miss_param`` or
``multi_turn_long_context`` (or without ``multi_turn_``); ``reset(seed, fold)`` plays the fold's entry
``seed % n`` (data.py's split), ``entry=`` one entry by id or index. It needs the ``bfcl-eval`` package, installed
without its declared dependencies (``make install`` does: they pin numpy 1.26.4, and the multi-turn part
needs none of them but mpmath). Importing this package imports nothing of it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from evoskill.envs.base import TextEnv
from evoskill.envs.bfcl import data
from evoskill.envs.registry import EnvScheme, EnvUnavailableError
from evoskill.envs.spec import EnvironmentInfo, EnvSpec, EnvSpecError

PARAMS = ("entry",)
INSTALL = "pip install --no-deps bfcl-eval==2026.3.23 (make install does)"


def available() -> bool:
    return data.available() and importlib.util.find_spec("jsonschema") is not None


def category(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = key if key.startswith("multi_turn_") else f"multi_turn_{key}"
    if key not in data.CATEGORIES:
        raise EnvSpecError(f"unknown BFCL category {name!r}; accepted: {', '.join(data.CATEGORIES)}")
    return key


def parse_bfcl(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    canonical = category(name)
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise EnvSpecError(f"unknown parameter {unknown[0]!r} for bfcl:; accepted parameters: {', '.join(PARAMS)}")
    out = dict(params)
    if "entry" in params:
        out["entry"] = data.entry_id(canonical, params["entry"])
        if validate and data.available():
            data.entry(canonical, out["entry"])
    return canonical, out


def _make(spec: EnvSpec, *, cache_dir: Path | None = None, **options: Any) -> TextEnv:
    if not available():
        raise EnvUnavailableError(f"bfcl: needs the bfcl-eval, mpmath and jsonschema packages: {INSTALL}")
    from evoskill.envs.bfcl.env import BfclEnv

    return BfclEnv(spec, **options)


def _environments() -> list[EnvironmentInfo]:
    ok = available()
    return [EnvironmentInfo("bfcl", c, data.DESCRIPTIONS[c], PARAMS, (c.removeprefix("multi_turn_"),), ok,
                            f"bfcl:{c}") for c in data.CATEGORIES]


BFCL = EnvScheme(make=_make, parse=parse_bfcl, description="BFCL multi-turn: API simulations, BFCL's own checker "
                 "(docs/bfcl.md)", environments=_environments)
