"""ToolEnv: a task of a ``tools:`` file as a :class:`~evoskill.envs.base.TextEnv` whose actions are tool calls.

``reset(seed, fold)`` plays the fold's task ``seed % n`` (or the spec's ``task=``), starting the tools it
names; each step is a call (calls.py), its result or its error the next observation, never an exception: a
tool that fails, times out or crashes is reported in the text and in :meth:`last_failure`, which the sandbox
copies into the transition (an external failure: not the agent's doing). ``final_answer(...)`` ends the
episode with the checkers' verdict as the score (checker.py). The episode's state (the task's state dict, the
results so far) is the env's own, so snapshots restore it at once, with no replay (tools are not called
again); an MCP server's own state is outside the env, shared by every branch search explores.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any, Unpack

from evoskill.common.v1.common_pb2 import Failure, FailureKind, Observation
from evoskill.core.errors import InvalidInput
from evoskill.core.limits import MAX_ACTION
from evoskill.envs.base import AdapterOptions, BaseTextEnv, heuristic_template
from evoskill.envs.spec import EnvSpec
from evoskill.envs.tools.calls import (
    ASK,
    COMBINE,
    FINAL,
    Call,
    CallError,
    ToolInfo,
    answer_values,
    enumerate_calls,
    read,
    render,
    seen_values,
    template_of,
    text_of,
)
from evoskill.envs.tools.checker import Verdict, coerce_check, verdict
from evoskill.envs.tools.runtime import ToolBox, ToolFailure, ToolLimits
from evoskill.envs.tools.task import PythonTool, ToolTask, load_tasks, spec_servers

MAX_RESULT_CHARS = 8000  # of one result in the observation text (the whole result stays in the episode)
DEFAULT_TIMEOUT_S = 5.0
STEP_SHARE = 0.4  # of the sandbox's step timeout a call (or a restart) may take
COOLDOWN_S = 60.0  # a call that timed out or crashed is answered from memory this long
_KINDS = {"timeout": FailureKind.FAILURE_KIND_EXTERNAL_TIMEOUT, "crash": FailureKind.FAILURE_KIND_EXTERNAL_ERROR,
          "error": FailureKind.FAILURE_KIND_NO_EFFECT}
META_HELP = {
    FINAL: "final_answer(answer): give the final answer; ends the task",
    COMBINE: "combine_results(): gather the results so far into one value (a candidate answer)",
    ASK: "ask_clarification(): ask the user what the task leaves open",
}


@dataclass
class Episode:
    task: ToolTask
    state: Any
    results: list[Any] = field(default_factory=list)  # the successful calls' results, in order
    trace: list[dict[str, Any]] = field(default_factory=list)  # every call, as a Python check reads it
    asked: bool = False
    combined: list[Any] | None = None


def shown(value: Any, limit: int = MAX_RESULT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def _one_line(text: str) -> str:
    return " ".join(text.split())


class ToolEnv(BaseTextEnv):
    """The ``tools:`` scheme's env (see the module docstring; the task schema in task.py, docs/tools.md)."""

    scheme = "tools"

    def __init__(self, spec: EnvSpec, **options: Unpack[AdapterOptions]) -> None:
        super().__init__(spec, **options)
        self._limits = ToolLimits()
        self._cap_s = float("inf")  # the sandbox's share of its step timeout (apply_limits)
        self._box: ToolBox | None = None
        self._episode: Episode | None = None
        self._tools: dict[str, ToolInfo] = {}
        self._by_task: dict[str, dict[str, ToolInfo]] = {}
        self._failure: Failure | None = None
        self._failing: dict[str, tuple[float, ToolFailure]] = {}  # call -> when it timed out or crashed
        self._load(self._spec)

    # -- hooks the sandbox calls ------------------------------------------------------------------------
    def apply_limits(self, *, step_timeout_s: float, memory_mb: int) -> None:
        """Fit tool calls and restarts into the sandbox's step timeout, each tool process under its memory cap."""
        self._cap_s = step_timeout_s * STEP_SHARE
        self._limits.restart_timeout_s = min(self._limits.restart_timeout_s, self._cap_s)
        self._limits.memory_mb = memory_mb

    def last_failure(self) -> Failure | None:
        """Why the last step's call gave no result (None when it did)."""
        return self._failure

    # -- what the env offers --------------------------------------------------------------------------------
    def tools(self) -> list[ToolInfo]:
        """The current task's tools (their JSON schemas), for prompts and exports."""
        self._current()
        return list(self._tools.values())

    def template(self, action: str) -> str:
        name = action.split("(", 1)[0].strip()
        return template_of(name, self._tools) if "(" in action else heuristic_template(action)

    # -- BaseTextEnv ---------------------------------------------------------------------------------------
    def _load(self, spec: EnvSpec) -> None:
        self._file = load_tasks(spec.name)
        self._servers = spec_servers(spec.params)
        self._timeout_s = float(spec.params.get("timeout", DEFAULT_TIMEOUT_S))
        self._by_task = {}
        if self._box is not None and self._box.folder != self._file.folder:
            self._box.close()
            self._box = None

    def _task(self, seed: int, fold: str) -> ToolTask:
        if "task" in self._spec.params:
            return self._file.task(self._spec.params["task"])
        pool = self._file.pool(fold)
        return pool[seed % len(pool)]

    def _tools_of(self, task: ToolTask) -> dict[str, ToolInfo]:
        if task.id not in self._by_task:
            if self._box is None:
                self._box = ToolBox(self._file.folder, self._limits)
            self._by_task[task.id] = self._box.tools([*task.tools, *self._servers])
        return self._by_task[task.id]

    def _reset(self, seed: int, fold: str) -> Observation:
        task = self._task(seed, fold)
        self._tools = self._tools_of(task)
        self._episode = Episode(task, copy.deepcopy(task.state))
        self._failure = None
        self._gold = self._gold_of(task) if self._need_gold else None
        intro = task.goal if task.state is None else f"{task.goal}\nState: {shown(task.state)}"
        return self._observe(intro)

    def _gold_of(self, task: ToolTask) -> list[str] | None:
        if task.gold is None:
            return None
        out = []
        for step in task.gold:
            try:
                out.append(text_of(read(step, self._tools), self._tools))
            except CallError as exc:
                raise InvalidInput(f"task {task.id!r}: gold step {step!r}: {exc}") from None
        return out

    def _step_unlisted(self, action: str) -> Observation:
        """A call the listing does not name (an LLM's) is played when it fits a tool's schema."""
        self._read(action)
        return self._step(action)

    def _read(self, action: str) -> Call:
        try:
            return read(action, self._tools)
        except CallError as exc:
            raise self._reject(action, str(exc)) from None

    def _step(self, action: str) -> Observation:
        episode = self._current_episode()
        self._failure = None
        call = self._read(action)
        if call.name == FINAL:
            return self._finish(episode, call)
        if call.name == ASK:
            episode.asked = True
            said = episode.task.clarification
            text = f"The user says: {said}" if said else "The user has nothing to add: the task is as stated."
        elif call.name == COMBINE:
            episode.combined = list(episode.results)
            text = f"Combined results: {shown(episode.combined)}"
        else:
            text = self._call(episode, call)
        obs = self._observe(text)
        limit = episode.task.max_steps
        if limit is not None and len(self._history) + 1 >= limit:
            obs.done = True
        return obs

    def _call(self, episode: Episode, call: Call) -> str:
        assert self._box is not None
        tool = self._tools[call.name]
        said = text_of(call, self._tools)
        python = next((s for s in episode.task.tools if isinstance(s, PythonTool) and s.key == tool.source), None)
        timeout = min(episode.task.timeout_s or self._timeout_s, self._cap_s)
        try:
            self._not_failing(said)
            result, state = self._box.call(tool, python, call.arguments, episode.state, timeout)
        except ToolFailure as failure:
            if failure.kind != "error":
                self._failing.setdefault(said, (time.monotonic(), failure))
            message = _one_line(str(failure))
            episode.trace.append({"tool": call.name, "arguments": call.arguments, "ok": False, "error": message})
            self._failure = Failure(kind=_KINDS[failure.kind], message=message)
            return f"{said} failed ({failure.kind}): {message}"
        episode.state = state
        episode.results.append(result)
        episode.trace.append({"tool": call.name, "arguments": call.arguments, "ok": True, "result": result})
        return f"{said} returned: {shown(result)}"

    def _not_failing(self, said: str) -> None:
        """A call that timed out or crashed is not made again for a while: search probes the same calls over and
        over, and one batch of probes shares one step timeout of the sandbox."""
        since, failure = self._failing.get(said, (0.0, None))
        if failure is not None:
            ago = time.monotonic() - since
            if ago < COOLDOWN_S:
                raise ToolFailure(failure.kind, f"{failure} [{ago:.0f} s ago; not called again for {COOLDOWN_S:g} s]")
            del self._failing[said]

    def _finish(self, episode: Episode, call: Call) -> Observation:
        answered = "answer" in call.arguments
        answer = call.arguments.get("answer")
        judged = verdict(episode.task, answer, answered, episode.state, episode.trace, self._run_check)
        if judged.external:
            self._failure = Failure(kind=FailureKind.FAILURE_KIND_EXTERNAL_ERROR, message="; ".join(judged.notes))
        said = f"Final answer {shown(answer, 200)}" if answered else "Finished"
        return self._observe(f"{said}: {_judgement(judged)}", done=True, won=judged.won, score=judged.score)

    def _run_check(self, answer: Any, state: Any, trace: list[dict[str, Any]]) -> float:
        assert self._box is not None and self._episode is not None
        task = self._episode.task
        assert task.check is not None
        offered = {"answer": answer, "state": state, "trace": trace, "task": task.model_dump(mode="json")}
        try:
            value = self._box.check(task.check, offered, min(task.timeout_s or self._timeout_s, self._cap_s))
        except ToolFailure as failure:
            raise RuntimeError(_one_line(str(failure))) from None
        return coerce_check(value)

    def _observe(self, text: str, *, done: bool = False, won: bool = False, score: float = 0.0) -> Observation:
        episode = self._current_episode()
        task = episode.task
        return Observation(
            text=text, goal=self._goal(task), valid_actions=[] if done else self._offered(episode),
            score=score, done=done, won=won, lost=done and not won,
            inventory=shown(episode.state) if task.state is not None else "",
        )

    def _goal(self, task: ToolTask) -> str:
        lines = [f"- {t.signature()}: {_first_line(t.description)}".rstrip(": ") for t in self._tools.values()]
        return f"{task.goal}\n\nTools:\n" + "\n".join([*lines, *(f"- {h}" for h in META_HELP.values())])

    def _offered(self, episode: Episode) -> list[str]:
        """The valid actions: every call calls.enumerate_calls lists, then the meta actions."""
        task = episode.task
        seen = seen_values(episode.results)
        actions = [render(tool.name, arguments, tool.params)
                   for tool in self._tools.values() for arguments in enumerate_calls(tool, task.arguments, seen)]
        offered = [*task.answers, *([episode.combined] if episode.combined is not None else [])]
        actions += [render(FINAL, {"answer": a}) for a in answer_values(offered, episode.results)]
        if not task.has_expected_answer:
            actions.append(f"{FINAL}()")
        if len(episode.results) >= 2 and episode.combined != episode.results:
            actions.append(f"{COMBINE}()")
        if not episode.asked:
            actions.append(f"{ASK}()")
        # An action is one line of at most MAX_ACTION characters whose spacing survives normalisation.
        return [a for a in actions if len(a) <= MAX_ACTION and " ".join(a.split()) == a]

    def _current_episode(self) -> Episode:
        assert self._episode is not None, "reset the env first"
        return self._episode

    def _native_snapshot(self) -> Any:
        return copy.deepcopy(self._episode)

    def _native_restore(self, native: Any) -> bool:
        self._episode = copy.deepcopy(native)
        self._tools = self._tools_of(self._episode.task)
        self._failure = None
        return True

    def _close(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."


def _judgement(judged: Verdict) -> str:
    head = "accepted" if judged.won else "not accepted"
    notes = f" ({'; '.join(judged.notes)})" if judged.notes else ""
    return f"{head}, score {judged.score:.2f}{notes}"
