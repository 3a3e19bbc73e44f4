"""The ``tools:`` scheme: tasks whose actions are calls of Python functions and MCP servers (docs/tools.md).

``tools:PATH.jsonl[?servers=CMD|URL,task=ID,timeout=S]`` plays the task file at PATH, one task per line
(task.py). Importing this package starts nothing and imports neither the tools nor the MCP SDK.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from evoskill.envs.base import TextEnv
from evoskill.envs.registry import EnvScheme, EnvUnavailableError
from evoskill.envs.spec import EnvironmentInfo, EnvSpec
from evoskill.envs.tools.task import PARAMS, parse_tools_spec

EXAMPLE = "tools:examples/evoskill-tools-example/tasks.jsonl"


def _available() -> bool:
    return importlib.util.find_spec("jsonschema") is not None and importlib.util.find_spec("mcp") is not None


def _make(spec: EnvSpec, *, cache_dir: Path | None = None, **options: Any) -> TextEnv:
    if not _available():
        raise EnvUnavailableError("tool tasks need the mcp and jsonschema packages: pip install 'evoskill[envs]'")
    from evoskill.envs.tools.env import ToolEnv

    return ToolEnv(spec, **options)


def _environments() -> list[EnvironmentInfo]:
    return [EnvironmentInfo("tools", "PATH.jsonl", "Tool tasks: calls of Python functions and MCP servers "
                            "(docs/tools.md)", PARAMS, (), _available(), EXAMPLE)]


TOOLS = EnvScheme(make=_make, parse=parse_tools_spec, description="Tool tasks from a JSONL file (docs/tools.md)",
                  environments=_environments, file_names=True)
