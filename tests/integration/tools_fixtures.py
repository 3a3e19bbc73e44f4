"""Task files for the tools tests, written into a test's folder: Python tools and an MCP server that hang and
crash, beside the example's bookshop server and mcp-server-time from PyPI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "evoskill-tools-example"
BOOKSHOP = {"command": sys.executable, "args": [str(EXAMPLE / "bookshop_server.py")]}
TIME = {"command": "python -m mcp_server_time --local-timezone UTC"}
FAULTY_SERVER = {"command": "python faulty_server.py"}
SCIFI_GOLD = ["search_books(genre='science fiction')", "get_price(isbn='978-0441478125')",
              "get_price(isbn='978-0553293357')", "get_price(isbn='978-0441172719')"]

PYTOOLS = '''
import os, time

def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b

def tick(state: dict) -> int:
    """Counts its calls in the state, and in calls.log beside the task file."""
    state["ticks"] = state.get("ticks", 0) + 1
    with open("calls.log", "a") as log:
        log.write("tick\\n")
    return state["ticks"]

def stall_py(seconds: float) -> str:
    """Answers after that long."""
    time.sleep(seconds)
    return "late"

def die_py(code: int) -> str:
    """Takes its process down."""
    print("dying now", flush=True)
    os._exit(code)
'''

SERVER = '''
import os, time
from mcp.server.mcpserver import MCPServer

server = MCPServer("faulty")

@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return text

@server.tool()
def stall() -> str:
    """Never answers."""
    time.sleep(600)
    return "late"

@server.tool()
def die() -> str:
    """Takes the server down."""
    os._exit(7)

server.run()
'''


def write_tasks(folder: Path, *tasks: dict[str, Any]) -> Path:
    """A task file of ``tasks`` in ``folder``, with pytools.py and faulty_server.py beside it."""
    (folder / "pytools.py").write_text(PYTOOLS)
    (folder / "faulty_server.py").write_text(SERVER)
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path
