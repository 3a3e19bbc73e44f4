"""BFCL's API simulations and checker, used as BFCL uses them.

:func:`instances` makes an entry's API objects as ``execute_multi_turn_func_call`` does (its class, its
``_load_scenario`` of the initial config); :func:`execute` runs one call on them with that function's rules
(method names prefixed with their instance by BFCL's own ``_process_method_calls``, its forbidden names, its
result strings), so what an episode observes is what BFCL's checker reproduces when it replays the calls.
:func:`check` is BFCL's ``multi_turn_checker`` on the episode's calls, as its eval runner calls it; the
instances the checker keeps in its module's globals (keyed by a model name) are dropped afterwards, so
every check starts from the initial state.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import itertools
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from evoskill.envs.bfcl.data import Entry

# execute_multi_turn_func_call refuses these before its eval (its own list)
FORBIDDEN = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
_names = itertools.count()
_lock = threading.Lock()  # the checker's instances live in one module's globals


def instances(entry: Entry) -> dict[str, Any]:
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

    out: dict[str, Any] = {}
    for name in entry.classes:
        instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)()
        if name not in STATELESS_CLASSES:
            config = entry.raw.get("initial_config", {}).get(name, {})
            instance._load_scenario(copy.deepcopy(config), long_context=entry.long_context)
        out[name] = instance
    return out


def methods(objects: dict[str, Any]) -> dict[str, str]:
    """Method name -> the class whose instance answers it (a later class wins a shared name, as in BFCL)."""
    out: dict[str, str] = {}
    for class_name, instance in objects.items():
        for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                out[name] = class_name
    return out


def _variable(class_name: str) -> str:
    return f"_bfcl_{class_name}"


def result_text(value: Any) -> str:
    """A call's result as BFCL's executor writes it (strings as they are, dicts as JSON)."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


@dataclass(frozen=True)
class Outcome:
    text: str  # what BFCL's executor returns for the call
    value: Any  # the method's return value (None on error)
    error: bool  # it raised, or returned an {"error": ...} answer


def execute(call: str, objects: dict[str, Any], by_method: dict[str, str]) -> Outcome:
    """Run ``call`` (a call's text whose arguments are literals) on ``objects`` as BFCL's executor does."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import _process_method_calls

    name = call.split("(", 1)[0].split(".")[-1].strip()
    try:
        if name in FORBIDDEN:
            raise Exception(f"Function call {name} is not allowed.")
        processed = _process_method_calls(call, {m: _variable(c) for m, c in by_method.items()})
        scope = {_variable(c): objects[c] for c in objects}
        value = eval(processed, {"__builtins__": {}}, scope)  # literals and known methods only (env.py)
        text = result_text(value)  # inside, as in BFCL: an int too long for a string is an error answer
    except Exception as exc:
        return Outcome(f"Error during execution: {exc}", None, True)
    return Outcome(text, value, isinstance(value, dict) and "error" in value)


def _forget(prefix: str) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    for key in [k for k in vars(multi_turn_utils) if k.startswith(prefix)]:
        delattr(multi_turn_utils, key)


def check(entry: Entry, turns: list[list[str]]) -> dict[str, Any]:
    """BFCL's verdict on the calls of each turn ({"valid": bool, "error_type", "error_message", ...}): the eval
    runner's (a run whose turns are fewer than the entry's was force-terminated), then ``multi_turn_checker``
    with each call as one step of its turn."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    if len(turns) != len(entry.ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated",
                "error_message": f"{len(turns)} of {len(entry.ground_truth)} turns played"}
    model = f"evoskill_{os.getpid()}_{next(_names)}"
    with _lock:
        try:
            return multi_turn_checker([[[c] for c in turn] for turn in turns], copy.deepcopy(entry.ground_truth),
                                      copy.deepcopy(entry.raw), entry.category, model)
        finally:
            _forget(f"{model}_")


def turns_passed(entry: Entry, turns: list[list[str]]) -> int:
    """How many turns from the first BFCL's checks accept (each prefix of the conversation checked alone)."""
    for k in range(1, len(turns) + 1):
        if not check(Entry(entry.raw, entry.ground_truth[:k]), turns[:k])["valid"]:
            return k - 1
    return len(turns)
