"""BfclEnv: a BFCL multi-turn entry as a :class:`~evoskill.envs.base.TextEnv` whose actions are calls of its API
classes' methods (docs/bfcl.md).

The user's requests arrive one turn at a time, as BFCL's inference loop gives them: the first at reset, the
next when the agent ends the turn with ``final_answer(...)`` or ``ask_clarification()`` (the answer's text is
the agent's reply; BFCL scores calls, not replies). A call runs on the episode's own API objects as BFCL's
executor runs it (backend.py), its result string or its error the observation, never an exception; an
unknown function is answered as BFCL's executor answers it and is not kept. The turn that ends the last one
is scored by BFCL's multi-turn checker on the calls of every turn: won when it accepts the entry (the
leaderboard's accuracy), the score the share of turns it accepts from the first. A turn of more than BFCL's
step limit of calls ends the episode, lost, as BFCL force-terminates it. The state is the API objects, so a
snapshot is their deep copy, restored with no replay. Valid actions: the calls ``calls.enumerate_calls``
offers from the values the user's turns and the results gave, then the two meta actions.
"""

from __future__ import annotations

import copy
import inspect
import re
from dataclasses import dataclass, field
from typing import Any, Unpack

from evoskill.common.v1.common_pb2 import Failure, FailureKind, Observation
from evoskill.core.limits import MAX_ACTION
from evoskill.envs.base import AdapterOptions, BaseTextEnv, heuristic_template
from evoskill.envs.bfcl import backend
from evoskill.envs.bfcl.data import Entry, entry, function_docs, pool, short_description
from evoskill.envs.spec import EnvSpec
from evoskill.envs.tools.calls import (
    ASK,
    COMBINE,
    FINAL,
    MAX_ANSWER_CHARS,
    CallError,
    ToolInfo,
    enumerate_calls,
    parse,
    render,
    seen_values,
    template_of,
)
from evoskill.envs.tools.env import shown

END_TURN = f"{FINAL}()"
MAX_HINTS = 16  # values of one type offered to a parameter
MAX_NUMBER = 1_000_000  # of a number enumerated (_offerable)
MAX_PRECISION = 100  # digits a MathAPI precision is enumerated with (mpmath takes minutes for a million)
MAX_REMEMBERED = 20_000  # tools' enumerated calls kept (_calls_of)
META_HELP = {
    FINAL: "final_answer(answer?): end this turn, answer the user (the next request follows)",
    ASK: "ask_clarification(): end this turn asking the user for what the request leaves open",
}
_QUOTED = re.compile(r"(?<![A-Za-z0-9])'([^'\n]{1,200})'(?![A-Za-z0-9])|\"([^\"\n]{1,200})\"")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_FILE = re.compile(r"\b[\w\-]+\.[A-Za-z][A-Za-z0-9]{0,4}\b")
_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b")  # academic_hub: a name, not a word


@dataclass
class State:
    """What a call changes: the API objects and the conversation so far (a snapshot is its deep copy)."""

    objects: dict[str, Any]
    turn: int = 0
    calls: list[list[str]] = field(default_factory=lambda: [[]])  # the kept calls of each turn so far
    values: list[Any] = field(default_factory=list)  # the successful calls' return values, in order


def _offerable(value: Any) -> bool:
    """A value to enumerate: short text, or a number of at most a million (MathAPI's power of two results
    would otherwise grow past what a worker can compute or print)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return abs(value) <= MAX_NUMBER
    return isinstance(value, str) and len(value) <= MAX_ANSWER_CHARS


def _scalars(value: Any, depth: int = 5) -> list[Any]:
    if isinstance(value, bool) or value is None or depth <= 0:
        return []
    if isinstance(value, str | int | float):
        return [value] if _offerable(value) else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else []
    return [s for v in items for s in _scalars(v, depth - 1)]


def _number(text: str) -> int | float:
    return float(text) if "." in text else int(text)


def question_values(text: str) -> list[Any]:
    """Values a user's request names: quoted strings, file names, snake_case names, numbers."""
    quoted = [a or b for a, b in _QUOTED.findall(text)]
    return [*quoted, *_FILE.findall(text), *_SNAKE.findall(text), *(_number(n) for n in _NUMBER.findall(text))]


def _fits(value: Any, kind: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return False


def hints_for(tools: list[ToolInfo], values: list[Any]) -> dict[str, list[Any]]:
    """``tool.param`` -> the values of its type (first seen first); optional booleans also take True."""
    unique = list({repr(v): v for v in values if _offerable(v)}.values())
    out: dict[str, list[Any]] = {}
    for tool in tools:
        required = set(tool.required)
        for param, schema in tool.schema.get("properties", {}).items():
            kind = schema.get("type")
            if param not in required:
                if kind == "boolean":
                    out[f"{tool.name}.{param}"] = [True]
                continue
            top = MAX_PRECISION if param == "precision" else MAX_NUMBER
            fitting = [v for v in unique if _fits(v, kind) and (isinstance(v, str) or abs(v) <= top)][:MAX_HINTS]
            if fitting:
                out[f"{tool.name}.{param}"] = fitting
    return out


class BfclEnv(BaseTextEnv):
    """The ``bfcl:`` scheme's env (see the module docstring)."""

    scheme = "bfcl"

    def __init__(self, spec: EnvSpec, **options: Unpack[AdapterOptions]) -> None:
        super().__init__(spec, **options)
        self._entry: Entry | None = None
        self._state: State | None = None
        self._failure: Failure | None = None
        self._listed: dict[tuple[str, int], dict[str, ToolInfo]] = {}  # (entry, turn) -> its functions
        self._by_method: dict[str, dict[str, str]] = {}  # entry -> method -> class
        self._enumerated: dict[str, list[str]] = {}  # see _calls_of
        self._goals: dict[tuple[str, int], str] = {}  # (entry, turn) -> the goal's text
        self._load(self._spec)

    # -- hooks the sandbox and the exports call ---------------------------------------------------------
    def last_failure(self) -> Failure | None:
        """Why the last step's call gave no result (None when it did): an error answer, the agent's doing."""
        return self._failure

    def tools(self) -> list[ToolInfo]:
        """The functions the current turn offers (their JSON schemas), for prompts and exports."""
        self._current()
        return list(self._tools().values())

    def template(self, action: str) -> str:
        name = action.split("(", 1)[0].strip()
        return template_of(name, self._tools()) if "(" in action and self._entry else heuristic_template(action)

    # -- the episode ---------------------------------------------------------------------------------------
    def _load(self, spec: EnvSpec) -> None:
        self._category = spec.name

    def _reset(self, seed: int, fold: str) -> Observation:
        chosen = self._spec.params.get("entry")
        if chosen is not None:
            self._entry = entry(self._category, chosen)
        else:
            entries = pool(self._category, fold)
            self._entry = entries[seed % len(entries)]
        self._state = State(backend.instances(self._entry))
        self._failure = None
        # The gold path is the possible answer: only a train entry's reaches an agent.
        self._gold = self._gold_of(self._entry) if self._need_gold and self._entry.fold == "train" else None
        return self._observe(f"User: {self._request(0)}")

    def _gold_of(self, e: Entry) -> list[str]:
        assert self._state is not None
        by_method = self._methods()
        out: list[str] = []
        for calls in e.ground_truth:
            out += [self._canonical(*parse(c), by_method) for c in calls]
            out.append(END_TURN)
        return out

    def _request(self, turn: int) -> str:
        e = self._current_entry()
        said = " ".join(m["content"] for m in e.turns[turn] if m.get("role") == "user")
        if not said and turn in e.held_out:
            from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

            said = DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
        return said

    def _methods(self) -> dict[str, str]:
        """Method name -> class of the entry's API objects (the same for every state of one entry)."""
        e = self._current_entry()
        if e.id not in self._by_method:
            self._by_method[e.id] = backend.methods(self._current_state().objects)
        return self._by_method[e.id]

    def _tools(self) -> dict[str, ToolInfo]:
        """The functions the current turn lists: the classes' docs, less those held out until a later turn."""
        e, turn = self._current_entry(), self._state.turn if self._state else 0
        key = (e.id, turn)
        if key not in self._listed:
            later = {f for t, names in e.held_out.items() if t > turn for f in names}
            self._listed[key] = {t.name: t for c in e.classes for t in function_docs(c) if t.name not in later}
        return self._listed[key]

    def _canonical(self, name: str, positional: list[Any], keywords: dict[str, Any], by_method: dict[str, str]) -> str:
        """The call's text with its arguments named in the doc's order where its method's signature binds them,
        else as given (BFCL's executor answers that one with the error Python raises)."""
        assert self._state is not None
        method = getattr(self._state.objects[by_method[name]], name)
        try:
            signature = inspect.signature(method)
            variadic = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values())
            bound = None if variadic else signature.bind(*positional, **keywords).arguments
        except (TypeError, ValueError):
            bound = None
        if bound is not None:
            tool = next((t for c in self._current_entry().classes for t in function_docs(c) if t.name == name), None)
            return render(name, dict(bound), tool.params if tool else list(signature.parameters))
        parts = [repr(v) for v in positional] + [f"{k}={v!r}" for k, v in keywords.items()]
        return f"{name}({', '.join(parts)})"

    def _step_unlisted(self, action: str) -> Observation:
        """Any call is played (an LLM's too): BFCL's executor answers a bad one with an error."""
        return self._step(action)

    def _step(self, action: str) -> Observation:
        state = self._current_state()
        self._failure = None
        try:
            name, positional, keywords = parse(action)
        except CallError as exc:
            raise self._reject(action, str(exc)) from None
        if name in (FINAL, ASK):
            return self._end_turn(state, asked=name == ASK)
        by_method = self._methods()
        if name not in by_method:
            text = f"Error during execution: name {name!r} is not defined"  # BFCL's executor's answer
            if name == COMBINE:
                text += " (BFCL tasks have no combine_results; end the turn with final_answer)"
            self._failure = Failure(kind=FailureKind.FAILURE_KIND_NO_EFFECT, message=text)
            return self._observe(f"{action} failed: {text}")
        said = self._canonical(name, positional, keywords, by_method)
        outcome = backend.execute(said, state.objects, by_method)
        state.calls[state.turn].append(said)
        if outcome.error:
            self._failure = Failure(kind=FailureKind.FAILURE_KIND_NO_EFFECT, message=outcome.text[:500])
        else:
            state.values.append(outcome.value)
        if len(state.calls[state.turn]) > self._step_limit():
            return self._finish(state, forced=True)
        return self._observe(f"{said} {'failed' if outcome.error else 'returned'}: {shown(outcome.text)}")

    @staticmethod
    def _step_limit() -> int:
        from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT

        return int(MAXIMUM_STEP_LIMIT)

    def _end_turn(self, state: State, *, asked: bool) -> Observation:
        state.turn += 1
        if state.turn >= len(self._current_entry().turns):
            return self._finish(state)
        state.calls.append([])
        arrived = sorted(self._current_entry().held_out.get(state.turn, ()))
        news = f" (new functions: {', '.join(arrived)})" if arrived else ""
        return self._observe(f"{'You asked. ' if asked else ''}User: {self._request(state.turn)}{news}")

    def _finish(self, state: State, *, forced: bool = False) -> Observation:
        e = self._current_entry()
        if forced:  # the turn in progress is lost; the turns before it are checked
            verdict: dict[str, Any] = {"valid": False, "error_type": "multi_turn:force_terminated"}
            passed = backend.turns_passed(e, state.calls[: state.turn])
            head = f"More than {self._step_limit()} calls in turn {state.turn + 1}: BFCL force-terminates the entry"
        else:
            verdict = backend.check(e, state.calls)
            passed = len(e.turns) if verdict["valid"] else backend.turns_passed(e, state.calls)
            head = ("BFCL's checker accepts every turn" if verdict["valid"] else
                    f"BFCL's checker does not accept turn {passed + 1}: {verdict.get('error_message', '')}")
        score = passed / len(e.turns)
        return self._observe(f"{head} ({verdict.get('error_type', 'valid')}); score {score:.2f}", done=True,
                             won=bool(verdict["valid"]), score=score)

    def _observe(self, text: str, *, done: bool = False, won: bool = False, score: float = 0.0) -> Observation:
        return Observation(text=text, goal=self._goal(), valid_actions=[] if done else self._offered(),
                           score=score, done=done, won=won, lost=done and not won)

    def _goal(self) -> str:
        e, state = self._current_entry(), self._current_state()
        turn = min(state.turn, len(e.turns) - 1)
        key = (e.id, turn)
        if key not in self._goals:
            asked = [f"{t + 1}. {self._request(t)}" for t in range(turn + 1)]
            lines = [f"- {t.signature()}: {short_description(t)}" for t in self._tools().values()]
            # The functions before the turns: a goal grows by a turn at each turn's end, and an LLM server's prefix
            # cache (llama.cpp, vLLM, hosted prompt caching) reuses what comes before the first change.
            self._goals[key] = (f"BFCL {e.category} entry {e.id}: do what the user asks, turn by turn, with the "
                                "functions below.\nFunctions:\n"
                                + "\n".join([*lines, *(f"- {h}" for h in META_HELP.values())])
                                + "\n\nUser turns so far:\n" + "\n".join(asked))
        return self._goals[key]

    def _offered(self) -> list[str]:
        state = self._current_state()
        tools = list(self._tools().values())
        said = [v for t in range(state.turn, -1, -1) for v in question_values(self._request(t))]
        found = [v for value in reversed(state.values) for v in _scalars(value)]
        hints = hints_for(tools, [*said, *found])
        seen = {k: [v for v in vs if _offerable(v)]
                for k, vs in seen_values([v for v in state.values if isinstance(v, dict)]).items()}
        actions = [a for t in tools for a in self._calls_of(t, hints, seen)]
        actions += [END_TURN, f"{ASK}()"]
        return [a for a in actions if len(a) <= MAX_ACTION and " ".join(a.split()) == a]

    def _calls_of(self, tool: ToolInfo, hints: dict[str, list[Any]], seen: dict[str, list[Any]]) -> list[str]:
        """``enumerate_calls`` of one tool, remembered by the values it is offered: sibling states of a search
        mostly offer the same ones, and checking each argument set against the schema is the costly part."""
        params = tool.params
        key = repr((tool.name, [hints.get(f"{tool.name}.{p}") for p in params], [seen.get(p) for p in params]))
        if key not in self._enumerated:
            if len(self._enumerated) >= MAX_REMEMBERED:
                self._enumerated.clear()
            self._enumerated[key] = [render(tool.name, a, params) for a in enumerate_calls(tool, hints, seen)]
        return self._enumerated[key]

    def _current_entry(self) -> Entry:
        assert self._entry is not None, "reset the env first"
        return self._entry

    def _current_state(self) -> State:
        assert self._state is not None, "reset the env first"
        return self._state

    def _native_snapshot(self) -> Any:
        return self._entry, copy.deepcopy(self._state)

    def _native_restore(self, native: Any) -> bool:
        self._entry, state = native
        self._state = copy.deepcopy(state)
        self._failure = None
        return True

    def _close(self) -> None:
        self._state = None
