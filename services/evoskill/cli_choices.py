"""The choices the CLI's options accept, declared once: typer turns each enum into a click `Choice`, so a value
outside is a usage error naming the flag and the accepted values before any work starts. Each mirrors the
tuple its consumer checks (tests/unit/test_cli_choices.py keeps them equal); the agents are core's `AgentKind`."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from evoskill.core.agent import AgentKind


class Fold(StrEnum):
    """envs.spec.FOLDS"""

    TRAIN = "train"
    DEV = "dev"
    TEST = "test"


class HeldOutFold(StrEnum):
    """The folds kept out of the learner's replay (training's evaluation, the exploration's episodes)."""

    DEV = "dev"
    TEST = "test"


class ExportFold(StrEnum):
    """`evoskill export --fold`: a fold, or every one."""

    TRAIN = "train"
    DEV = "dev"
    TEST = "test"
    ANY = "any"


class ExportFormat(StrEnum):
    """library.finetune.FORMATS"""

    SFT = "sft"
    PREFERENCE = "preference"


class Service(StrEnum):
    """platform.config.SERVICES"""

    SANDBOX = "sandbox"
    REWARD = "reward"
    MEMORY = "memory"
    PLANNER = "planner"
    LEARNER = "learner"
    ORCHESTRATOR = "orchestrator"


class SearchAlgorithm(StrEnum):
    """orchestrator.training.logic.SEARCH_ALGORITHMS but "" (no option: search.algorithm)."""

    PUCT = "puct"
    GUMBEL = "gumbel"


class TuneMode(StrEnum):
    """orchestrator.training.logic.TUNE_MODES but "" (no option: no tuning)."""

    ES = "es"


class EvalAgent(StrEnum):
    """orchestrator.training.logic.EVAL_AGENTS but "" (no option: the epoch's own agent)."""

    POLICY = AgentKind.POLICY.value


E = TypeVar("E", bound=StrEnum)
L = TypeVar("L", bound=list[Any])


class Numbers(list[int]):
    """An option's comma-separated integers ("0,1,2"), parsed by `numbers()`."""


class Agents(list[AgentKind]):
    """An option's comma-separated agents ("random,policy"), parsed by `agents`."""


def numbers(least: int | None = None) -> Callable[[str | Numbers], Numbers]:
    """typer's `parser=` for comma-separated integers, each at least `least`: anything else is a usage error
    (exit 2) naming the flag, the item and what is accepted."""
    def parse(value: str | Numbers) -> Numbers:
        if isinstance(value, Numbers):  # typer passes a default through the parser too
            return value
        items = [item.strip() for item in value.split(",") if item.strip()]
        out = Numbers()
        for item in items:
            try:
                out.append(int(item))
            except ValueError:
                raise typer.BadParameter(f"{item!r} is not an integer (expected e.g. 0,1,2)") from None
            if least is not None and out[-1] < least:
                raise typer.BadParameter(f"{item} is below {least} (each must be at least {least})")
        if not out:
            raise typer.BadParameter("expected one or more comma-separated integers, e.g. 0,1,2")
        return out
    return parse


def _members(kind: type[E], into: type[L]) -> Callable[[str | L], L]:
    """typer's `parser=` for comma-separated members of `kind`, no repeats, collected `into` a list class."""
    def parse(value: str | L) -> L:
        if isinstance(value, into):
            return value
        out = into()
        for item in (item.strip() for item in str(value).split(",")):
            if not item:
                continue
            try:
                member = kind(item)
            except ValueError:
                raise typer.BadParameter(f"{item!r} is not one of {', '.join(kind)}") from None
            if member not in out:
                out.append(member)
        if not out:
            raise typer.BadParameter(f"expected one or more of {', '.join(kind)}, comma-separated")
        return out
    return parse


class Engine(StrEnum):
    """`evoskill bench memory --engines`: Qdrant local mode, Qdrant Edge (if installed)."""

    LOCAL = "local"
    EDGE = "edge"


class Engines(list[Engine]):
    """An option's comma-separated memory engines ("local,edge"), parsed by `engines`."""


def llm_url(value: str) -> str:
    """typer's `parser=` for `--llm`: an http(s) URL of an OpenAI-compatible API ("" = not given)."""
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if value and (parts.scheme not in ("http", "https") or not parts.netloc):
        raise typer.BadParameter(f"{value!r} is not an http(s) URL (expected e.g. http://127.0.0.1:8000/v1)")
    return value


def output_file(path: Path | None) -> Path | None:
    """typer's `callback=` for an option naming a file to write: its folder is created while the command line is
    read, so a run never ends by failing to write what it did; one that cannot be is a usage error naming the
    flag (exit 2)."""
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise typer.BadParameter(f"cannot create its folder {path.parent} ({exc.strerror})") from None
    return path


# `evoskill solve|eval|train`: the LLM of that run's planner (cli.with_llm).
LlmUrl = Annotated[str, typer.Option(
    "--llm", parser=llm_url, metavar="URL",
    help="an OpenAI-compatible API the planner asks in this run (as llm.base_url), e.g. http://127.0.0.1:8000/v1")]
LlmModel = Annotated[str, typer.Option("--llm-model", metavar="NAME", help="the model it is asked for (as llm.model)")]


class MemorySwitch(StrEnum):
    ON = "on"
    OFF = "off"


# `evoskill solve|eval|train|bench quality`: the exploration and memory switches of the episodes played
# (core/exploration.py); unset = the planner's search settings.
ExploreEpsilon = Annotated[float | None, typer.Option(
    "--explore-epsilon", min=0.0, max=1.0, metavar="P",
    help="probability per step of a random candidate instead of the agent's choice (search.explore_epsilon)")]
Novelty = Annotated[float | None, typer.Option(
    "--novelty", min=0.0, metavar="W", help="count-based novelty bonus W/(count+1) of logit (search.novelty_weight)")]
Curiosity = Annotated[float | None, typer.Option(
    "--curiosity", min=0.0, metavar="W", help="edge reward bonus W × the surprise of θ's dynamics model, in search "
    "(search.curiosity_weight; a θ published without one: off)")]
Memory = Annotated[MemorySwitch | None, typer.Option(
    "--memory", help="on: retrieved experiences advise the agent (search.memory_weight, 1 where it is 0); off: none")]
EntropyTrigger = Annotated[float | None, typer.Option(
    "--entropy-trigger", min=0.0, max=1.0, metavar="T", help="θ + MCTS searches only the steps where θ's "
    "normalised entropy is at least T, else takes θ's choice (search.entropy_trigger; 0: every step)")]


def exploration_config(epsilon: float | None, novelty: float | None, memory: MemorySwitch | None,
                       memory_weight: float, curiosity: float | None = None,
                       entropy_trigger: float | None = None) -> dict[str, float]:
    """The request's SearchConfig fields the switches set (`memory_weight`: the settings' own)."""
    config: dict[str, float] = {}
    if epsilon is not None:
        config["explore_epsilon"] = epsilon
    if novelty is not None:
        config["novelty_weight"] = novelty
    if curiosity is not None:
        config["curiosity_weight"] = curiosity
    if entropy_trigger is not None:
        config["entropy_trigger"] = entropy_trigger
    if memory is not None:
        config["memory_weight"] = (memory_weight or 1.0) if memory is MemorySwitch.ON else 0.0
    return config


agents = _members(AgentKind, Agents)
engines = _members(Engine, Engines)


__all__ = [
    "AgentKind",
    "Agents",
    "Curiosity",
    "Engine",
    "Engines",
    "EntropyTrigger",
    "EvalAgent",
    "ExploreEpsilon",
    "ExportFold",
    "ExportFormat",
    "Fold",
    "HeldOutFold",
    "LlmModel",
    "LlmUrl",
    "Memory",
    "MemorySwitch",
    "Novelty",
    "Numbers",
    "SearchAlgorithm",
    "Service",
    "TuneMode",
    "agents",
    "engines",
    "exploration_config",
    "llm_url",
    "numbers",
    "output_file",
]
