"""BFCL's multi-turn data as the ``bfcl:`` scheme reads it, from the installed ``bfcl-eval`` package: the entries
(questions, initial states, involved classes, held-out functions), their possible answers, and the function
docs of the API classes as :class:`~evoskill.envs.tools.calls.ToolInfo` (their JSON schemas, BFCL's types
made JSON Schema's). Folds are a fixed split of the entry index (the same in every category, whose entries of
one index share a scenario): index % 5 == 0 is test, 1 is dev, the rest train.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from evoskill.envs.spec import EnvSpecError
from evoskill.envs.tools.calls import ToolInfo

PACKAGE = "bfcl_eval"
CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
DESCRIPTIONS = {
    "multi_turn_base": "BFCL multi-turn: every request can be done with the tools given",
    "multi_turn_miss_func": "BFCL multi-turn: a needed function arrives only in a later turn",
    "multi_turn_miss_param": "BFCL multi-turn: a request lacks a parameter the next turn gives",
    "multi_turn_long_context": "BFCL multi-turn: the states and results are long",
}
FOLD_OF_REMAINDER = {0: "test", 1: "dev"}  # index % 5; the rest is train
# BFCL's types in its function docs -> JSON Schema's
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}


def available() -> bool:
    return importlib.util.find_spec(PACKAGE) is not None and importlib.util.find_spec("mpmath") is not None


def data_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EnvSpecError(f"{PACKAGE} is not installed (make install, or: pip install --no-deps bfcl-eval)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def index_of(entry_id: str) -> int:
    return int(entry_id.rsplit("_", 1)[1])


def fold_of(entry_id: str) -> str:
    return FOLD_OF_REMAINDER.get(index_of(entry_id) % 5, "train")


@dataclass(frozen=True)
class Entry:
    """One BFCL multi-turn entry and its possible answer (the ground-truth calls, turn by turn)."""

    raw: dict[str, Any]  # as BFCL's checker reads it
    ground_truth: list[list[str]]

    @property
    def id(self) -> str:
        return str(self.raw["id"])

    @property
    def category(self) -> str:
        return self.id.rsplit("_", 1)[0]

    @property
    def fold(self) -> str:
        return fold_of(self.id)

    @property
    def turns(self) -> list[list[dict[str, str]]]:
        return list(self.raw["question"])

    @property
    def classes(self) -> list[str]:
        return list(self.raw["involved_classes"])

    @property
    def held_out(self) -> dict[int, list[str]]:
        """Turn index -> the functions that arrive at that turn (miss_func)."""
        return {int(k): list(v) for k, v in self.raw.get("missed_function", {}).items()}

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category or "composite" in self.category  # as BFCL decides it


@cache
def entries(category: str) -> tuple[Entry, ...]:
    folder = data_dir()
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(folder / "possible_answer" / f"BFCL_v4_{category}.json")}
    out = tuple(Entry(e, answers[e["id"]]) for e in _jsonl(folder / f"BFCL_v4_{category}.json"))
    return tuple(sorted(out, key=lambda e: index_of(e.id)))


def entry_id(category: str, given: str) -> str:
    """An entry's id from its id or its index."""
    return given if given.startswith(f"{category}_") else f"{category}_{given}"


def entry(category: str, given: str) -> Entry:
    wanted = entry_id(category, given)
    for e in entries(category):
        if e.id == wanted:
            return e
    raise EnvSpecError(f"{category} has no entry {given!r} (ids {category}_0 to {category}_"
                       f"{len(entries(category)) - 1}, or their index)")


def pool(category: str, fold: str) -> list[Entry]:
    return [e for e in entries(category) if e.fold == fold]


def json_schema(node: Any) -> Any:
    """A BFCL parameter doc as JSON Schema: its types renamed, descriptions kept."""
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if k != "type"}
    if "type" in node:
        kind = _TYPES.get(node["type"], node["type"])
        if kind is not None:
            out["type"] = kind
    if "properties" in node:  # property names are not schemas
        out["properties"] = {k: json_schema(v) for k, v in node["properties"].items()}
    return out


@cache
def function_docs(class_name: str) -> tuple[ToolInfo, ...]:
    """The documented functions of one API class, as BFCL lists them to a model."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    docs = _jsonl(data_dir() / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name])
    return tuple(ToolInfo(d["name"], d.get("description", ""), json_schema(d.get("parameters", {})), class_name)
                 for d in docs)


def short_description(tool: ToolInfo) -> str:
    """The doc's own part, without the class's preamble every function of it repeats."""
    return tool.description.split("Tool description: ", 1)[-1].strip()
