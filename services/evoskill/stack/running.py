"""What a client command knows of the embedded stack on its state folder: whether one runs (its supervisor is
alive, not merely its `stack.json` left behind), which of its components are down, and how to wait for the
supervisor to bring them back. This is how a command tells "a service is down (restarting)" from "no stack
is running"."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from evoskill.platform.config import Settings
from evoskill.platform.rpc import check_health
from evoskill.stack.supervisor import StackError, read_state

WAIT_FOR_RESTART_S = 180.0  # the longest backoff (30 s) and a planner's start-up (compiling its kernels) under load


class ServiceDown(StackError):
    """A service of a running stack is down or was unreachable, in one line."""


def process_alive(pid: int) -> bool:
    """A live process (not a zombie) has this pid."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # gone, or never was
        return False


def live_state(settings: Settings) -> dict[str, Any] | None:
    """`stack.json` of the stack running on this state folder; None when none runs (no file, or its supervisor
    died)."""
    state = read_state(settings)
    if state is None or not process_alive(int(state["supervisor_pid"])):
        return None
    return state


def _down(component: dict[str, Any]) -> str:
    if component.get("gave_up"):
        return f"{component['name']} is down: the stack {component['gave_up']}; see {component['log']}"
    return f"{component['name']} is down (restarting after {component.get('last_exit') or 'an exit'})"


def outage(state: dict[str, Any] | None, state_dir: Path) -> str:
    """Why a call may have found a service unavailable, as far as the stack on `state_dir` knows."""
    if state is None:
        return f"no stack is running on {state_dir}"
    down = [_down(c) for c in state["components"] if c.get("state", "running") != "running"]
    if down:
        return "; ".join(down)
    restarted = [f"{c['name']} ({c['restarts']}x, last exit {c['last_exit']})" for c in state["components"]
                 if c.get("restarts")]
    if restarted:
        return "a service was restarted: " + ", ".join(restarted) + "; try again"
    return "the stack is running but a service did not answer; `evoskill status` shows each one"


async def wait_for_stack(settings: Settings, say: Callable[[str], None],
                         timeout_s: float = WAIT_FOR_RESTART_S) -> dict[str, Any] | None:
    """Until no component of the running stack is restarting and a planner of it answers; the stack's state,
    or None when no stack runs. ServiceDown if the planner stays down (given up, or past `timeout_s`); another
    component the supervisor gave up on is named and left: commands that need it fail."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    told: set[str] = set()

    def tell(name: str, line: str) -> None:
        if name not in told:
            told.add(name)
            say(line)

    while (state := live_state(settings)) is not None:
        components = state["components"]
        for c in components:
            if c.get("state", "running") != "running":
                tell(c["name"], _down(c) + ("" if c.get("gave_up") else ": waiting for the stack to bring it back"))
        planners = [c for c in components if c["name"].partition("-")[0] == "planner"]  # replicas: planner-<i>
        if planners and all(c.get("gave_up") for c in planners):
            raise ServiceDown(_down(planners[0]))
        live = [c for c in planners if not c.get("gave_up")]
        restarting = any(c.get("state") == "restarting" for c in components)
        if not restarting and (not live or await check_health(live[0]["address"], settings=settings.grpc)):
            return state
        for c in planners:
            if c.get("restarts"):  # started again, not serving yet
                tell(c["name"], f"{c['name']} does not answer yet (restarted {c['restarts']}x, last exit "
                     f"{c['last_exit']}): waiting for it")
        if loop.time() > deadline:
            raise ServiceDown(f"the stack's services did not come back within {timeout_s:.0f} s: "
                              f"{outage(state, settings.state_dir.resolve())}")
        await asyncio.sleep(0.2)
    return None
