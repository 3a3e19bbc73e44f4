"""What every `evoskill` command shares: its consoles, the one-line failure, the client runner, and the checks of
`--env`, `--llm` and a parameter set. The top-level commands (cli.py) and their sub-apps (`*_cli.py`,
library/cli.py) import these; none of them imports another command module for them."""

from __future__ import annotations

import asyncio
import inspect
import re
import signal
import threading
from collections.abc import Callable, Mapping

import typer
from rich.console import Console

from evoskill.core.errors import InvalidInput
from evoskill.platform.config import Settings

console = Console()
err = Console(stderr=True, soft_wrap=True)  # one line per error, never wrapped


def fail(message: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def with_llm(settings: Settings, url: str, model: str) -> Settings:
    """`settings` with `--llm` and `--llm-model` as llm.base_url and llm.model. A running stack's planner keeps the
    LLM it was started with: one asked for that is not that one is refused in one line."""
    from evoskill.stack.running import live_state

    asked = {key: value for key, value in (("base_url", url), ("model", model)) if value}
    if not asked:
        return settings
    state = live_state(settings)
    if state is not None:
        running = state.get("llm") or {}
        if any(running.get(key, "") != value for key, value in asked.items()):
            fail(f"--llm: the stack running on {settings.state_dir.resolve()} asks "
                 f"{running.get('base_url') or 'no LLM'} ({running.get('model') or 'no model'}), and its planner "
                 "keeps that; stop it (`evoskill down`) or start it with EVOSKILL_LLM__BASE_URL/__MODEL", 2)
    return settings.model_copy(update={"llm": settings.llm.model_copy(update=asked)})


def located_env(env: str) -> str:
    """`--env` as the services read it (a task file's path made absolute: they run in the state folder), once
    `checked_env` has passed it."""
    from evoskill.envs.registry import located

    checked_env(env)
    return located(env)


def checked_env(env: str) -> None:
    """A spec that names no environment is refused in one line naming `--env`, before any service is started
    (the flags' choices and ranges are declared on them)."""
    from evoskill.envs import EnvSpecError, parse_spec

    try:
        parse_spec(env)
    except EnvSpecError as exc:
        fail(f"--env {env!r}: {exc}", 2)


def refuse_problems(problems: list[str], command: Callable[..., object], aliases: Mapping[str, str] | None = None,
                    ) -> None:
    """A parameter check's problems (each led by the field it names, `validate` of the training and exploration
    logic) as one line naming the flags a user typed (`--train-steps`, not train_steps) and exit 2; nothing when
    there are none. `aliases` maps a field to the parameter of `command` that sets it (envs: env)."""
    if not problems:
        return
    flags = {name: "--" + name.replace("_", "-") for name in inspect.signature(command).parameters}
    flags |= {field: flags[parameter] for field, parameter in (aliases or {}).items()}

    # the leading field, and any other field with an underscore (a plain word may be prose: "epochs")
    named = [re.escape(f) for f in flags if "_" in f]
    other = re.compile(r"\b(" + "|".join(named) + r")\b") if named else None

    def flagged(problem: str) -> str:
        field, rest = re.match(r"(\w*)(.*)", problem, re.S).groups()  # type: ignore[union-attr]
        rest = other.sub(lambda m: flags[m.group(1)], rest) if other else rest
        return flags.get(field, field) + rest

    fail("; ".join(map(flagged, problems)), 2)


def run_client(main):  # type: ignore[no-untyped-def]
    """Client commands: bad input and unreachable services end in one line, not a traceback. SIGTERM (a job's
    timeout, `kill`) unwinds as Ctrl-C does, so an embedded stack started for the command is stopped and what
    was played is kept: by default it would end Python at once and leave the stack's processes running."""
    import grpc

    from evoskill.stack.supervisor import StackError

    terminated = False

    async def until_terminated() -> object:
        nonlocal terminated
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def terminate() -> None:
            nonlocal terminated
            terminated = True
            task.cancel()

        # Signals reach the main thread only: a command run in another (a test's runner, an embedding app) keeps
        # its host's handling.
        handles = threading.current_thread() is threading.main_thread()
        before = signal.getsignal(signal.SIGTERM)
        if handles:
            loop.add_signal_handler(signal.SIGTERM, terminate)
        try:
            return await main()
        except asyncio.CancelledError:
            if not terminated:
                raise
            task.uncancel()
            return None
        finally:
            if handles:
                loop.remove_signal_handler(signal.SIGTERM)
                signal.signal(signal.SIGTERM, before)  # the loop's removal leaves the default, not what was there

    try:
        result = asyncio.run(until_terminated())
        if terminated:
            raise KeyboardInterrupt("SIGTERM")
        return result  # what `main` returned
    except grpc.aio.AioRpcError as exc:
        fail(f"{exc.code().name}: {exc.details()}")
    except InvalidInput as exc:
        fail(str(exc), 2)
    except StackError as exc:
        fail(str(exc))


