"""What the LLM is asked at a node and how its answer is read.

Two questions, one request each: where the environment lists enough candidates, ``rank`` them (the answer
is their numbers, best first: "3, 1"); where it lists few or none (tool tasks, whose candidates are only the
calls `enumerate_calls` could fill in), ``propose``: the answer is one action a line, best first, each a
listed candidate's number or a new action. A node listing more than `max_listed` candidates (ScienceWorld's
hundreds, a tool task's enumerated calls) is shown by kind: each kind's count and a few numbered examples, and
the LLM writes its actions: its answer names any of them, and a prompt stays a few hundred tokens where the
whole list was thousands (BFCL: ~80% of a prompt). A new action must fit the environment's grammar where it has one
(`grammar_of`: for a tool task, a call of one of the tools its goal lists, checked against the schema rebuilt
from their signatures, envs/tools/calls.py); the environment then judges it for real when the search steps
it. Retrieved memories enter as tips (core/memory/fusion.py).

A third question scores a leaf of the search (``value_prompt``, `llm.value_weight`): the chance, in percent, that
the agent completes its goal from there; `parse_value` reads the first number of the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from evoskill.core.limits import MAX_ACTION

RANK_SYSTEM = (
    "You advise an agent that acts in an environment (a text-based game or a set of tools). You are given the "
    "agent's goal, its current observation, tips from similar past situations and a numbered list of candidate "
    "actions. Answer with the numbers of the best actions to take now, best first, separated by commas (for "
    "example: 3, 1). Answer with the numbers only."
)
PROPOSE_SYSTEM = (
    "You advise an agent that acts in an environment (a text-based game or a set of tools). You are given the "
    "agent's goal, its current observation, tips from similar past situations and the numbered candidate "
    "actions the environment lists, if any. Answer with at most {limit} actions to take now, best first, one per "
    "line: the number of a listed candidate, or a new action written exactly as the environment accepts it. A "
    "tool call is name(key=value, ...) with one of the listed tools and literal values (strings in quotes); "
    "final_answer(answer=...) gives the answer. Write nothing else."
)
VALUE_SYSTEM = (
    "You judge how an agent is doing in an environment (a text-based game or a set of tools). You are given the "
    "agent's goal, the actions it took so far and its current observation. Answer with one number from 0 to 100: "
    "the chance, in percent, that it completes the goal from here. Answer with the number only."
)
MAX_STATE_CHARS = 4000  # long observations are cut so one request stays small and fast
MAX_TAKEN = 20  # earlier actions shown
RANK_TOKENS = 64  # a ranking is a few numbers; a bound keeps latency bounded too
PROPOSE_TOKENS = 256  # a few calls
VALUE_TOKENS = 16  # a number
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)  # reasoning models' scratchpad
_NUMBER = re.compile(r"\b\d+\b")
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
_NUMBERS = re.compile(r"^\d+(?:\s*,\s*\d+)*\.?$")
_BULLET = re.compile(r"^(?:[-*•]\s+|\d+[.)]\s+)")
_FENCE = re.compile(r"^```\w*$")

Grammar = Callable[[str], str]  # an action's text -> its canonical form; ValueError says why it is not one


@dataclass(frozen=True)
class Prompt:
    """One request's messages and its answer's bound; `propose` says how to read the answer."""

    system: str
    user: str
    max_tokens: int
    propose: bool
    numbered: tuple[str, ...] = ()  # the candidates the prompt numbers, in order: what "3" in the answer names

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


@dataclass(frozen=True)
class LlmAnswer:
    """An answer read: `ranked`, the actions it named best first (listed ones and new); `new`, the new ones
    that fit the grammar; `rejected`, (line, why) for the lines that named nothing usable."""

    ranked: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    rejected: list[tuple[str, str]] = field(default_factory=list)


def prompt(goal: str, state: str, actions: Sequence[str], tips: Sequence[str], *, propose: bool,
           limit: int = 3, taken: Sequence[str] = (), kinds: Sequence[str] = (), max_listed: int = 0) -> Prompt:
    """The request at one state: `taken` is what the episode (and the search's path) did to get there, the
    last `MAX_TAKEN` of it (a tool task's earlier calls, which the observation no longer shows). More than
    `max_listed` actions (0: no bound) are shown by their `kinds` (each action's template), and the LLM
    proposes."""
    lines = _situation(goal, state, taken)
    if tips:
        lines += ["Tips from similar past situations:", *(f"- {t}" for t in tips), ""]
    numbered = list(actions)
    if 0 < max_listed < len(actions):
        propose = True
        by_kind = grouped(actions, kinds or actions, max_listed)  # no kinds: a list cut at max_listed
        numbered = [a for examples in by_kind.values() for a in examples[1]]
        lines += [f"The environment accepts {len(actions)} actions here; by kind, with numbered examples "
                  "(write any action of these kinds, or an example's number):"]
        at = 1
        for kind, (count, examples) in by_kind.items():
            shown = "; ".join(f"{at + k}. {a}" for k, a in enumerate(examples))
            lines.append(f"- {kind} ({count}): {shown}")
            at += len(examples)
        lines.append("")
    elif actions:
        lines += ["Candidate actions:", *(f"{i}. {a}" for i, a in enumerate(actions, 1)), ""]
    if propose:
        lines.append(f"Best actions (at most {limit}, one per line, best first):")
        return Prompt(PROPOSE_SYSTEM.format(limit=limit), "\n".join(lines), PROPOSE_TOKENS, True, tuple(numbered))
    lines.append("Best actions (numbers, best first):")
    return Prompt(RANK_SYSTEM, "\n".join(lines), RANK_TOKENS, False, tuple(numbered))


def value_prompt(goal: str, state: str, taken: Sequence[str] = ()) -> Prompt:
    """The request that judges one state: its goal, the last `MAX_TAKEN` actions that led there, its observation."""
    lines = [*_situation(goal, state, taken), "Chance of completing the goal (0-100):"]
    return Prompt(VALUE_SYSTEM, "\n".join(lines), VALUE_TOKENS, False)


def _situation(goal: str, state: str, taken: Sequence[str]) -> list[str]:
    """The lines every question starts with: the goal, the last `MAX_TAKEN` actions taken, the observation (cut
    at MAX_STATE_CHARS), each followed by a blank line."""
    observation = state if len(state) <= MAX_STATE_CHARS else state[:MAX_STATE_CHARS] + " ..."
    lines = [f"Goal: {goal}", ""]
    if taken:
        lines += ["Actions taken so far:", *(f"- {a}" for a in taken[-MAX_TAKEN:]), ""]
    return [*lines, "Current observation:", observation.strip(), ""]


def parse_value(reply: str) -> float | None:
    """The chance an answer gives, in [0, 1]: its first number read as a percentage (a fraction below 1 as
    written, "0.7" = 70%), clipped; None where it has no number."""
    match = _DECIMAL.search(_THINK.sub(" ", reply))
    if match is None:
        return None
    number = float(match.group())
    return min(max(number if number <= 1 and "." in match.group() else number / 100, 0.0), 1.0)


def grouped(actions: Sequence[str], kinds: Sequence[str], examples: int) -> dict[str, tuple[int, list[str]]]:
    """kind -> (how many of `actions` are of it, its examples), kinds in order of their first action: `examples`
    in all, dealt one a kind at a time, so every kind shows one before any shows two (a kind beyond the
    `examples`-th shows only its count). A kind's examples are spread over its actions: enumerated calls vary
    their last argument first, and the first few alone would all say the same (`cp(source='a', destination='a')`,
    `cp(source='a', destination='b')`)."""
    members: dict[str, list[str]] = {}
    for action, kind in zip(actions, kinds, strict=True):
        members.setdefault(kind, []).append(action)
    shown = dict.fromkeys(members, 0)
    left, depth = examples, 0
    while left > 0 and any(len(m) > depth for m in members.values()):
        for kind, m in members.items():
            if left > 0 and len(m) > depth:
                shown[kind] += 1
                left -= 1
        depth += 1
    return {kind: (len(m), [m[i * len(m) // shown[kind]] for i in range(shown[kind])])
            for kind, m in members.items()}


def parse_choices(reply: str, actions: Sequence[str]) -> list[int]:
    """Indices (0-based, distinct, best first) of the actions a reply names, by number (1-based) or by text.

    The reply is read left to right; at each point the longest candidate action written there wins over a
    number, so "go to room 2" echoed is that action, not action 2. Numbers out of range are ignored.
    """
    text = _THINK.sub(" ", reply).lower()
    by_text = sorted(((a.strip().lower(), i) for i, a in enumerate(actions) if a.strip()), key=lambda t: -len(t[0]))
    matches: list[tuple[int, int, int]] = []  # (start, end, action index)
    taken = [False] * len(text)
    for action, i in by_text:  # longest first, so a shorter action inside a longer one is not matched again
        for m in re.finditer(rf"(?<!\w){re.escape(action)}(?!\w)", text):
            if not any(taken[m.start():m.end()]):
                taken[m.start():m.end()] = [True] * (m.end() - m.start())
                matches.append((m.start(), m.end(), i))
    for m in _NUMBER.finditer(text):
        number = int(m.group())
        if 1 <= number <= len(actions) and not any(taken[m.start():m.end()]):
            matches.append((m.start(), m.end(), number - 1))
    choices: list[int] = []
    for _, _, i in sorted(matches):
        if i not in choices:
            choices.append(i)
    return choices


def free_text(text: str) -> str:
    """The grammar of an environment that has none of its own: one line of text, as the env normalises it."""
    action = " ".join(text.split())
    if not action or len(action) > MAX_ACTION:
        raise ValueError(f"an action is one line of 1 to {MAX_ACTION} characters")
    return action


def grammar_of(goal: str) -> Grammar:
    """The grammar new actions must fit: a call of a listed tool where the goal lists tools, else free text."""
    from evoskill.envs.tools.calls import read, text_of, tools_in_goal  # pure: parsing and schemas only

    tools = tools_in_goal(goal)
    if not tools:
        return free_text
    return lambda text: free_text(text_of(read(text, tools), tools))


def parse_answer(reply: str, actions: Sequence[str], grammar: Grammar, limit: int,
                 numbered: Sequence[str] | None = None) -> LlmAnswer:
    """A proposing answer read line by line: a line is a listed candidate (its number among `numbered`, the
    prompt's numbered ones, all `actions` by default; its text; or a call that is one once written canonically)
    or a new action the grammar accepts; at most `limit` new ones."""
    numbered = actions if numbered is None else numbered
    listed = {a.lower(): a for a in actions}
    ranked: list[str] = []
    new: list[str] = []
    rejected: list[tuple[str, str]] = []
    for raw in _THINK.sub("\n", reply).splitlines():
        line = raw.strip().strip("`").strip()
        if not line or _FENCE.match(raw.strip()):
            continue
        if _NUMBERS.match(line):  # "3" or "3, 1": listed candidates by number
            for number in map(int, _NUMBER.findall(line)):
                if 1 <= number <= len(numbered):
                    ranked.append(numbered[number - 1])
                else:
                    rejected.append((line, f"no candidate {number}"))
            continue
        text = _BULLET.sub("", line).strip().strip("`\"'").strip()
        action = listed.get(text.lower())
        if action is None:
            try:
                action = grammar(text)
            except ValueError as exc:  # CallError is one
                rejected.append((line, str(exc)))
                continue
            action = listed.get(action.lower(), action)
        if action not in actions and action not in new:
            if len(new) >= limit:
                continue
            new.append(action)
        ranked.append(action)
    return LlmAnswer(list(dict.fromkeys(ranked)), new, rejected)
