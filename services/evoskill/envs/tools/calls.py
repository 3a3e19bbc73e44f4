"""Tool calls as action text, the form every other part of evoskill handles (valid actions are strings).

An action is a call, ``name(key=value, ...)``, its values Python literals (JSON's ``true``/``false``/``null``
are read too), its keys in the order of the tool's JSON schema: ``get_current_time(timezone='Asia/Tokyo')``.
A tool's skill (template) is its name and parameters, ``convert_time(source_timezone, time, target_timezone)``,
so every call of a tool is one skill. The valid actions of a state are the calls whose arguments can be
enumerated: a schema's enums and booleans, the task's ``arguments`` hints, and the values earlier results gave
under a parameter's name (a search result's ``isbn`` offered to ``get_price(isbn)``); plus the meta actions of
seed 000 §3.2: ``final_answer(answer=...)`` for each candidate answer, ``combine_results()`` and
``ask_clarification()``. Pure: no tool runs here.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

FINAL, COMBINE, ASK = "final_answer", "combine_results", "ask_clarification"
META_TEMPLATES = {FINAL: f"{FINAL}(answer)", COMBINE: f"{COMBINE}()", ASK: f"{ASK}()"}
MAX_CALLS_PER_TOOL = 32  # enumerated calls of one tool in one state (the product of its values, cut)
MAX_VALUES = 16  # values offered for one parameter
MAX_ANSWERS = 32  # final_answer candidates in one state
MAX_ANSWER_CHARS = 200  # longer values are not offered as answers (an action is at most 1024 characters)
_OMIT = object()  # an optional parameter left out of an enumerated call
_CALL = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*\((.*)\)\s*$", re.DOTALL)
_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class CallError(ValueError):
    """The text is not a call of a known tool with valid arguments; the message says why."""


@dataclass(frozen=True)
class ToolInfo:
    """A tool as the env offers it: its name, description, JSON schema of the arguments, where it runs."""

    name: str
    description: str
    schema: Mapping[str, Any]
    source: str  # the key of its ToolSource
    wants_state: bool = False  # a Python tool with a `state` parameter

    @property
    def params(self) -> list[str]:
        return list(self.schema.get("properties", {}))

    @property
    def required(self) -> list[str]:
        return [p for p in self.params if p in set(self.schema.get("required", ()))]

    @property
    def template(self) -> str:
        return f"{self.name}({', '.join(self.params)})"

    def signature(self) -> str:
        """``name(p: type, q?: type)``: how the goal lists the tool."""
        props = self.schema.get("properties", {})
        required = set(self.required)
        parts = [f"{p}{'' if p in required else '?'}: {_type_name(props[p], self.schema)}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part, {}) if isinstance(node, Mapping) else {}
        return node if isinstance(node, Mapping) else {}
    return schema


def _options(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The alternatives of a parameter's schema ($ref resolved, anyOf/oneOf flattened)."""
    schema = _resolve(schema, root)
    alts = schema.get("anyOf") or schema.get("oneOf")
    return [o for a in alts for o in _options(a, root)] if alts else [schema]


def _type_name(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    names = []
    for o in _options(schema, root):
        if "enum" in o:
            names.append(" | ".join(repr(v) for v in o["enum"]))
        elif "const" in o:
            names.append(repr(o["const"]))
        else:
            names.append(str(o.get("type", "any")))
    return " | ".join(dict.fromkeys(names))


_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_LISTED = re.compile(r"^- ([A-Za-z0-9_][A-Za-z0-9_.\-]*)\((.*?)\)(?:: |$)")
_PARAM = re.compile(r"(?:^|, )([A-Za-z_][A-Za-z0-9_\-]*)(\??): ")


def _schema_of_type(text: str) -> dict[str, Any]:
    """The schema a `_type_name` text stands for (types and enum values); {} (anything) where it is unclear."""
    types: list[str] = []
    values: list[Any] = []
    for part in text.split(" | "):
        if part in _JSON_TYPES:
            types.append(part)
            continue
        try:
            values.append(ast.literal_eval(part))
        except (ValueError, SyntaxError):
            return {}
    options: list[dict[str, Any]] = [*({"type": t} for t in types), *([{"enum": values}] if values else [])]
    return options[0] if len(options) == 1 else {"anyOf": options} if options else {}


def tools_in_goal(goal: str) -> dict[str, ToolInfo]:
    """The tools a ToolEnv goal lists (``- signature(): description`` lines, env.py), their schemas rebuilt
    from the signatures: the types, enums and required parameters, no more. What a planner, which sees only
    observations, checks an LLM's call against before the env checks it against the full schema."""
    tools: dict[str, ToolInfo] = {}
    for line in goal.splitlines():
        match = _LISTED.match(line.strip())
        if match is None or match.group(1) in META_TEMPLATES:
            continue
        inner = match.group(2)
        heads = list(_PARAM.finditer(inner))
        ends = [h.start() for h in heads[1:]] + [len(inner)]
        properties = {h.group(1): _schema_of_type(inner[h.end():end]) for h, end in zip(heads, ends, strict=False)}
        required = [h.group(1) for h in heads if not h.group(2)]
        schema = {"type": "object", "properties": properties, "required": required}
        tools[match.group(1)] = ToolInfo(match.group(1), "", schema, source="goal")
    return tools


# -- text <-> call -------------------------------------------------------------------------------------------


def render(name: str, arguments: Mapping[str, Any], order: Sequence[str] = ()) -> str:
    """The canonical text of a call: keys in schema order, then any others sorted; values as Python literals."""
    keys = [k for k in order if k in arguments] + sorted(k for k in arguments if k not in order)
    return f"{name}({', '.join(f'{k}={arguments[k]!r}' for k in keys)})"


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str | int | float | bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        return {_key(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _literal(node.operand)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    raise CallError(f"{ast.unparse(node)!r} is not a literal (strings, numbers, true/false/null, lists, objects)")


def _key(node: ast.expr) -> str:
    value = _literal(node)
    if not isinstance(value, str):
        raise CallError(f"object keys are strings, not {value!r}")
    return value


def parse(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``name(a, k=v)`` -> (name, positional values, keyword values). A name is MCP's: letters, digits, _ - ."""
    match = _CALL.match(text)
    try:
        tree = ast.parse(f"f({match.group(2)})", mode="eval").body if match else None
    except SyntaxError:
        tree = None
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name) or tree.func.id != "f" or match is None:
        raise CallError("not a call; write name(key=value, ...)")
    if any(k.arg is None for k in tree.keywords) or any(isinstance(a, ast.Starred) for a in tree.args):
        raise CallError("no * or ** arguments; write name(key=value, ...)")
    keywords: dict[str, Any] = {}
    for k in tree.keywords:
        assert k.arg is not None
        if k.arg in keywords:
            raise CallError(f"argument {k.arg!r} given twice")
        keywords[k.arg] = _literal(k.value)
    return match.group(1), [_literal(a) for a in tree.args], keywords


def bind(params: Sequence[str], positional: Sequence[Any], keywords: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Positional values take the parameters in schema order (an LLM may write them so)."""
    if len(positional) > len(params):
        raise CallError(f"{name} takes {len(params)} argument(s), {len(positional) + len(keywords)} given")
    out = dict(zip(params, positional, strict=False))
    for k, v in keywords.items():
        if k in out:
            raise CallError(f"argument {k!r} of {name} given twice")
        out[k] = v
    return out


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Any:
    from jsonschema import Draft202012Validator  # lazy: only the tools scheme validates JSON schemas

    return Draft202012Validator(json.loads(schema_json))


def problem(tool: ToolInfo, arguments: Mapping[str, Any]) -> str:
    """Why ``arguments`` do not fit the tool's schema, or "" when they do."""
    validator = _validator(json.dumps(dict(tool.schema), sort_keys=True))
    error = next(iter(sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))), None)
    if error is None:
        return ""
    where = ".".join(str(p) for p in error.path)
    return f"{where}: {error.message}" if where else error.message


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def meta(self) -> bool:
        return self.name in META_TEMPLATES


def read(text: str, tools: Mapping[str, ToolInfo]) -> Call:
    """The call ``text`` names, its arguments bound and checked against the schema; CallError says why not."""
    name, positional, keywords = parse(text)
    if name == FINAL:
        arguments = bind(["answer"], positional, keywords, name)
        if set(arguments) - {"answer"}:
            raise CallError(f"{FINAL} takes one argument, answer")
        return Call(name, arguments)
    if name in (COMBINE, ASK):
        if positional or keywords:
            raise CallError(f"{name} takes no arguments")
        return Call(name)
    tool = tools.get(name)
    if tool is None:
        raise CallError(f"no tool {name!r}; tools: {', '.join(sorted(tools)) or 'none'}")
    arguments = bind(tool.params, positional, keywords, name)
    why = problem(tool, arguments)
    if why:
        raise CallError(f"invalid arguments for {tool.signature()}: {why}")
    return Call(name, arguments)


def text_of(call: Call, tools: Mapping[str, ToolInfo]) -> str:
    tool = tools.get(call.name)
    return render(call.name, call.arguments, tool.params if tool else ("answer",))


def template_of(name: str, tools: Mapping[str, ToolInfo]) -> str:
    tool = tools.get(name)
    return tool.template if tool else META_TEMPLATES.get(name, name)


# -- enumeration ---------------------------------------------------------------------------------------------


def _unique(values: Iterable[Any], limit: int) -> list[Any]:
    out: dict[str, Any] = {}
    for v in values:
        out.setdefault(json.dumps(v, sort_keys=True, default=str), v)
        if len(out) >= limit:
            break
    return list(out.values())


def harvest(value: Any, depth: int = 4) -> Iterator[tuple[str, Any]]:
    """(key, scalar) pairs of a result: what it offers later calls, under the key it gave them."""
    if depth <= 0:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(v, str | int | float | bool) or v is None:
                yield str(k), v
            else:
                yield from harvest(v, depth - 1)
    elif isinstance(value, list):
        for v in value:
            yield from harvest(v, depth - 1)


def _schema_values(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[Any]:
    values: list[Any] = []
    for o in _options(schema, root):
        if "enum" in o:
            values += list(o["enum"])
        elif "const" in o:
            values.append(o["const"])
        elif o.get("type") == "boolean":
            values += [True, False]
    return values


def param_values(tool: ToolInfo, param: str, hints: Mapping[str, Sequence[Any]],
                 seen: Mapping[str, Sequence[Any]]) -> list[Any]:
    """The values offered for one required parameter: hints, the schema's enums and booleans, and what results
    gave under its name."""
    schema = tool.schema.get("properties", {}).get(param, {})
    return _unique([*_hinted(tool, param, hints), *_schema_values(schema, tool.schema), *seen.get(param, ())],
                   MAX_VALUES)


def _hinted(tool: ToolInfo, param: str, hints: Mapping[str, Sequence[Any]]) -> list[Any]:
    """The task's values for a parameter: for this tool's (``tool.param``), else for any tool's."""
    return list(hints.get(f"{tool.name}.{param}", hints.get(param, ())))


def enumerate_calls(tool: ToolInfo, hints: Mapping[str, Sequence[Any]],
                    seen: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Argument sets of the calls to offer: every required parameter takes each of its values (a tool with a
    required parameter nothing names offers no call); an optional one is left out, or takes the values the
    task's hints name for it. Sets the schema rejects (a result's number for a string parameter) are dropped."""
    axes: list[tuple[str, list[Any]]] = []
    required = set(tool.required)
    for p in tool.params:
        if p in required:
            values = param_values(tool, p, hints, seen)
            if not values:
                return []
            axes.append((p, values))
        elif hinted := _hinted(tool, p, hints):
            axes.append((p, [_OMIT, *hinted]))
    out: list[dict[str, Any]] = []
    for combo in itertools.product(*(values for _, values in axes)):
        arguments = {p: v for (p, _), v in zip(axes, combo, strict=True) if v is not _OMIT}
        if not problem(tool, arguments):
            out.append(arguments)
            if len(out) >= MAX_CALLS_PER_TOOL:
                break
    return out


def answer_values(offered: Sequence[Any], results: Sequence[Any]) -> list[Any]:
    """Candidate final answers: the task's own, then each result's scalars (and the result, when it is one)."""
    values: list[Any] = list(offered)
    for result in results:
        if isinstance(result, str | int | float | bool):
            values.append(result)
        values += [v for _, v in harvest(result) if v is not None]
    values = [v for v in values if len(repr(v)) <= MAX_ANSWER_CHARS]
    return _unique(values, MAX_ANSWERS)


def seen_values(results: Sequence[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for result in results:
        for k, v in harvest(result):
            if v is not None:
                out.setdefault(k, []).append(v)
    return out
