"""The choices the CLI's options accept, declared once: typer turns each enum into a click `Choice`, so a value
outside is a usage error naming the flag and the accepted values before any work starts. Each mirrors the
tuple its consumer checks (tests/unit/test_cli_choices.py keeps them equal); the agents are core's `AgentKind`."""

from __future__ import annotations

from enum import StrEnum

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


__all__ = ["AgentKind", "EvalAgent", "ExportFold", "ExportFormat", "Fold", "HeldOutFold", "SearchAlgorithm",
           "Service", "TuneMode"]
