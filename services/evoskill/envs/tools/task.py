"""The task file of the ``tools:`` scheme: JSONL, one :class:`ToolTask` per line (docs/tools.md).

Pure: parsing and checking the file imports no tool and starts no server.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from evoskill.envs.spec import FOLDS, EnvSpecError

META_TOOLS = ("final_answer", "combine_results", "ask_clarification")
JsonValue = Any  # whatever json.loads gives


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PythonTool(_Strict):
    """A Python callable: ``pkg.mod:func`` (imported with the task file's folder first on sys.path), or the name
    of an ``evoskill.tools`` entry point. A parameter named ``state`` receives the episode's state."""

    python: str = Field(min_length=1)
    name: str | None = Field(None, description="the tool's name (default: the function's)")

    @property
    def key(self) -> str:
        return f"python:{self.python}"


class StdioServer(_Strict):
    """An MCP server the env starts as a subprocess and talks to over stdio. ``command`` alone may be a whole
    command line; ``python`` (or ``python3``) is the interpreter evoskill runs in."""

    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="variables added to the server's environment")
    cwd: str | None = Field(None, description="working folder (default: the task file's folder)")
    tools: list[str] | None = Field(None, description="offer only these of its tools")
    memory_mb: int | None = Field(None, ge=0, description="address-space cap (0: none; default: the sandbox's)")

    @property
    def argv(self) -> list[str]:
        return [self.command, *self.args] if self.args else shlex.split(self.command)

    @property
    def key(self) -> str:
        return "stdio:" + json.dumps([self.argv, self.env, self.cwd, self.memory_mb], sort_keys=True)


class HttpServer(_Strict):
    """An MCP server that is already running, reached over streamable HTTP."""

    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    tools: list[str] | None = None

    @property
    def key(self) -> str:
        return "http:" + json.dumps([self.url, self.headers], sort_keys=True)


ToolSource = PythonTool | StdioServer | HttpServer


def _kind(item: Any) -> str:
    if isinstance(item, dict):
        return next((k for k in ("python", "url", "command") if k in item), "command")
    return "python" if isinstance(item, PythonTool) else "url" if isinstance(item, HttpServer) else "command"


# A tool source is told apart by its key (python, url, command), so an error names the fields of that kind only.
TaggedSource = Annotated[
    Annotated[PythonTool, Tag("python")] | Annotated[HttpServer, Tag("url")] | Annotated[StdioServer, Tag("command")],
    Discriminator(_kind),
]


def source_of(item: Any) -> Any:
    """A string names a Python callable (``pkg.mod:func``) or an HTTP server (``http(s)://...``)."""
    if isinstance(item, str):
        return {"url": item} if item.startswith(("http://", "https://")) else {"python": item}
    return item


def server_of(text: str) -> StdioServer | HttpServer:
    """One entry of the spec's ``servers=`` list: a URL, else a stdio command line."""
    text = text.strip()
    if text.startswith(("http://", "https://")):
        return HttpServer(url=text)
    if not text:
        raise EnvSpecError("an empty server in servers=; separate servers with '|'")
    return StdioServer(command=text)


class ToolTask(_Strict):
    """One line of a task file. At least one checker: ``expected_answer``, ``expected_state`` or ``check``."""

    id: str = Field("", description="unique in the file (default: line-N)")
    goal: str = Field(min_length=1)
    state: dict[str, JsonValue] | None = Field(None, description="the initial state Python tools receive")
    tools: list[TaggedSource] = Field(default_factory=list)
    arguments: dict[str, list[JsonValue]] = Field(
        default_factory=dict, description="argument values to offer: by parameter name, or 'tool.parameter'")
    answers: list[JsonValue] = Field(default_factory=list, description="candidate answers to offer")
    expected_answer: JsonValue = None
    expected_state: dict[str, JsonValue] | None = None
    check: str | None = Field(None, description="pkg.mod:func(answer, state, trace) -> bool or score in [0, 1]")
    clarification: str | None = Field(None, description="what the user says when the agent asks")
    gold: list[str] | None = Field(None, description="a winning action sequence (the demo agent plays it)")
    max_steps: int | None = Field(None, gt=0)
    timeout_s: float | None = Field(None, gt=0, description="per tool call (default: the spec's timeout, 5 s)")
    fold: Literal["train", "dev", "test"] | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _sources(cls, value: Any) -> Any:
        return [source_of(v) for v in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _checked(self) -> ToolTask:
        if not self.has_expected_answer and self.expected_state is None and self.check is None:
            raise ValueError("no checker: give expected_answer, expected_state or check")
        for key in self.arguments:
            if key.count(".") > 1 or not all(key.split(".")):
                raise ValueError(f"arguments key {key!r} is neither 'parameter' nor 'tool.parameter'")
        return self

    @property
    def has_expected_answer(self) -> bool:
        return "expected_answer" in self.model_fields_set


@dataclass(frozen=True)
class TaskFile:
    path: Path
    tasks: tuple[ToolTask, ...]

    @property
    def folder(self) -> Path:
        return self.path.parent

    def task(self, task_id: str) -> ToolTask:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise EnvSpecError(f"{self.path.name} has no task {task_id!r}; its tasks: {', '.join(self.ids()[:20])}")

    def ids(self) -> list[str]:
        return [t.id for t in self.tasks]

    def pool(self, fold: str) -> list[ToolTask]:
        """The tasks a fold plays: those naming it, or every task where none names a fold."""
        if all(t.fold is None for t in self.tasks):
            return list(self.tasks)
        named = [t for t in self.tasks if t.fold == fold]
        if not named:
            folds = sorted({t.fold for t in self.tasks if t.fold})
            raise EnvSpecError(f"{self.path.name} has no task in fold {fold!r} (its tasks name {', '.join(folds)})")
        return named


def _line_error(path: Path, number: int, exc: ValidationError) -> EnvSpecError:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'task'}: {e['msg']}" for e in exc.errors())
    return EnvSpecError(f"{path.name} line {number}: {problems}")


def parse_tasks(path: Path, text: str) -> TaskFile:
    tasks: list[ToolTask] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EnvSpecError(f"{path.name} line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(data, dict):
            raise EnvSpecError(f"{path.name} line {number}: a task is a JSON object, not {type(data).__name__}")
        data.setdefault("id", f"line-{number}")
        try:
            task = ToolTask.model_validate(data)
        except ValidationError as exc:
            raise _line_error(path, number, exc) from None
        if task.id in seen:
            raise EnvSpecError(f"{path.name} line {number}: task id {task.id!r} is also on line {seen[task.id]}")
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise EnvSpecError(f"{path.name} has no task (one JSON object per line)")
    return TaskFile(path, tuple(tasks))


@lru_cache(maxsize=64)
def _load(path: str, mtime_ns: int, size: int) -> TaskFile:
    return parse_tasks(Path(path), Path(path).read_text(encoding="utf-8"))


def load_tasks(path: str | os.PathLike[str]) -> TaskFile:
    """The task file at ``path`` (read again when it changes); EnvSpecError names what is wrong."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise EnvSpecError(f"task file {str(p)!r}: {exc.strerror or exc}") from None
    if not p.is_file():
        raise EnvSpecError(f"task file {str(p)!r} is not a file")
    return _load(str(p), st.st_mtime_ns, st.st_size)


# -- the spec: tools:PATH.jsonl?servers=...,task=...,timeout=... --------------------------------------------

PARAMS = ("servers", "task", "timeout")


def spec_servers(params: dict[str, str]) -> list[StdioServer | HttpServer]:
    raw = params.get("servers", "")
    return [server_of(s) for s in raw.split("|")] if raw else []


def parse_tools_spec(name: str, params: dict[str, str], validate: bool) -> tuple[str, dict[str, str]]:
    """Canonical spec: the task file's absolute path and the parameters as given (checked with ``validate``)."""
    path = os.path.abspath(os.path.expanduser(name))
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise EnvSpecError(f"unknown parameter {unknown[0]!r} for tools:; accepted parameters: {', '.join(PARAMS)}")
    if "timeout" in params:
        try:
            ok = float(params["timeout"]) > 0
        except ValueError:
            ok = False
        if not ok:
            raise EnvSpecError(f"parameter timeout={params['timeout']!r} must be a positive number of seconds")
    if validate:
        try:
            spec_servers(params)
        except ValidationError as exc:
            raise EnvSpecError(f"servers={params['servers']!r}: {exc.errors()[0]['msg']}") from None
        tasks = load_tasks(path)
        if "task" in params:
            tasks.task(params["task"])
    return path, dict(params)


__all__ = ["FOLDS", "META_TOOLS", "HttpServer", "PythonTool", "StdioServer", "TaskFile", "ToolSource", "ToolTask",
           "load_tasks", "parse_tasks", "parse_tools_spec", "spec_servers"]
