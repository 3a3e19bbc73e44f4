"""The Python tool host: the process a task's Python tools and its check run in, apart from the env.

Run as a file (``python pyhost.py TASK_FOLDER``; it imports nothing of evoskill), one JSON request per line on
stdin, one JSON reply per line on the original stdout; what the tools print goes to stderr. It holds no episode
state: each call brings the state and its reply carries the state back, so the env can stop a hanging host, or
lose a crashed one, and start another without losing anything.

Requests: ``{"op": "ping", "refs"}`` -> ready, once those tools are imported; ``{"op": "describe", "ref"}`` ->
the tool's name, description and JSON schema of its arguments; ``{"op": "call", "ref", "arguments", "state"}`` ->
``result`` and ``state``; ``{"op": "check", "ref", "answer", "state", "trace", "task"}`` -> ``result``. A
failure is ``{"ok": false, "error": "Type: message"}``.
"""

import asyncio
import copy
import importlib
import inspect
import json
import os
import sys
import typing
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "evoskill.tools"
_resolved: dict[str, Any] = {}
_binders: dict[str, Any] = {}


def resolve(ref: str) -> Any:
    """``pkg.mod:func`` (or ``pkg.mod:Class.method``), else an ``evoskill.tools`` entry point's name."""
    if ref in _resolved:
        return _resolved[ref]
    if ":" in ref:
        module, _, attr = ref.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    else:
        found = list(entry_points(group=ENTRY_POINT_GROUP, name=ref))
        if not found:
            raise LookupError(f"{ref!r} is neither pkg.mod:func nor an {ENTRY_POINT_GROUP!r} entry point")
        obj = found[0].load()
    if not callable(obj):
        raise TypeError(f"{ref} is a {type(obj).__name__}, not a function")
    _resolved[ref] = obj
    return obj


def binder(ref: str) -> Any:
    """A pydantic TypeAdapter over the tool's parameters but ``state``: validates (and coerces) arguments and
    gives their JSON schema."""
    if ref in _binders:
        return _binders[ref]
    from pydantic import TypeAdapter

    func = resolve(ref)
    signature = inspect.signature(func)
    hints = typing.get_type_hints(func, include_extras=True)
    params = [p for name, p in signature.parameters.items() if name != "state"]

    def arguments(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    arguments.__signature__ = signature.replace(parameters=params, return_annotation=inspect.Signature.empty)  # type: ignore[attr-defined]
    arguments.__annotations__ = {p.name: hints[p.name] for p in params if p.name in hints}
    _binders[ref] = adapter = TypeAdapter(arguments)  # type: ignore[arg-type]
    return adapter


def jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=repr)


def run(func: Any, kwargs: dict[str, Any]) -> Any:
    out = func(**kwargs)
    return asyncio.run(out) if inspect.iscoroutine(out) else out


def describe(ref: str, name: str | None) -> dict[str, Any]:
    func = resolve(ref)
    schema = binder(ref).json_schema()
    schema.pop("additionalProperties", None)
    return {"name": name or func.__name__, "description": inspect.getdoc(func) or "", "schema": schema,
            "wants_state": "state" in inspect.signature(func).parameters}


def call(ref: str, arguments: dict[str, Any], state: Any) -> dict[str, Any]:
    from pydantic_core import ArgsKwargs

    func = resolve(ref)
    kwargs = binder(ref).validate_python(ArgsKwargs((), arguments))
    if "state" in inspect.signature(func).parameters:
        state = copy.deepcopy(state) if state is not None else {}
        kwargs["state"] = state  # the tool changes it in place; a tool that raises leaves the old one
    return {"result": jsonable(run(func, kwargs)), "state": state}


def check(ref: str, offered: dict[str, Any]) -> dict[str, Any]:
    func = resolve(ref)
    params = inspect.signature(func).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in offered.items() if takes_all or k in params}
    return {"result": jsonable(run(func, kwargs))}


def handle(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    try:
        if op == "ping":  # a fresh host: import what the env will call, then say it is ready
            import pydantic_core  # noqa: F401

            for ref in request.get("refs", ()):
                binder(ref)
            return {"ok": True}
        if op == "describe":
            return {"ok": True, "tool": describe(request["ref"], request.get("name"))}
        if op == "call":
            return {"ok": True, **call(request["ref"], request.get("arguments") or {}, request.get("state"))}
        if op == "check":
            offered = {k: request.get(k) for k in ("answer", "state", "trace", "task")}
            return {"ok": True, **check(request["ref"], offered)}
        return {"ok": False, "error": f"unknown op {op!r}"}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    sys.path[0] = os.path.abspath(sys.argv[1])  # the task's folder, not this file's
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints of the tools go to stderr, never into the replies
    for line in sys.stdin:
        if line.strip():
            out.write(json.dumps(handle(json.loads(line)), default=repr) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
