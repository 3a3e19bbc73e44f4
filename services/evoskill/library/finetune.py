"""What search found, as chat-format JSONL for fine-tuning an LLM with TRL (seed 000 §6.4; docs/export.md).

Pure: episodes in, rows out; the CLI (export_cli.py) reads the episodes and writes the lines.

Each row is one real step, its prompt exactly what θ reads of the state (core/learn/data.py
`episode_examples`, core/state_text.py): the goal with the notes, the feedback, room and inventory, and
the candidate actions with their "(been there)" marks.

- ``sft``: TRL's conversational language-modelling type, ``{"messages": [system, user, assistant]}``, the
  assistant the action the episode took (by default from won episodes only: their path is known to work).
- ``preference``: TRL's conversational preference type with an explicit prompt, ``{"prompt": [system,
  user], "chosen": [assistant], "rejected": [assistant]}``, from searched steps only. The chosen action
  is the one the search's policy favours most among those it visited (the visit distribution, or Gumbel's
  improved policy; ties to the higher Q); a rejected one is a visited action whose Q is at least
  ``q_margin`` below the chosen one's, the most visited of those first (its Q is the best estimated).

Rows of tool environments carry a ``tools`` column: the tools' JSON schemas in the function form chat
templates and TRL read, the meta actions included; with ``tool_calls`` their answers are ``tool_calls``
messages (``{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name",
"arguments"}}]}``) instead of the action text. Every row also names where it came from
(``episode_id``, ``step_index``, ``env``); preference rows the two actions' Q and visit shares. Trainers
ignore the extra columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evoskill.core.learn.data import Example, episode_examples
from evoskill.envs.tools.calls import ASK, COMBINE, FINAL, CallError, ToolInfo, bind, parse
from evoskill.envs.tools.env import META_HELP
from evoskill.events.v1.events_pb2 import EpisodeCompleted

SFT, PREFERENCE = "sft", "preference"
FORMATS = (SFT, PREFERENCE)
Q_MARGIN = 0.1  # reward units: one error-or-loop penalty (reward.error_or_loop)
SYSTEM_PROMPT = (
    "You are an agent acting in an environment to reach a goal. You are given the goal (with your notes), "
    "what you observe now and, where there are any, the candidate actions; an action marked (been there) "
    "leads back to a state you have already been in. Answer with the one action to take next, written "
    "exactly as listed."
)
Message = dict[str, Any]
Row = dict[str, Any]
ToolsOf = Callable[[EpisodeCompleted], list[dict[str, Any]] | None]  # an episode's tool schemas, None without tools


@dataclass(frozen=True)
class ExportOptions:
    """Which episodes and steps become rows; `won_only` None means the format's default (sft: won only)."""

    format: str = SFT
    won_only: bool | None = None
    fold: str | None = "train"  # None: every fold
    env: str | None = None  # an environment spec, exactly as the episodes name it
    q_margin: float = Q_MARGIN
    pairs_per_state: int = 1
    limit: int | None = None  # rows at most
    tool_calls: bool = False  # a tool task's answers as tool_calls messages rather than the action text

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.q_margin < 0 or not np.isfinite(self.q_margin):
            raise ValueError(f"q_margin must be a finite number >= 0 (got {self.q_margin})")
        if self.pairs_per_state < 1:
            raise ValueError(f"pairs_per_state must be at least 1 (got {self.pairs_per_state})")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be at least 1 (got {self.limit})")

    @property
    def wins_only(self) -> bool:
        return self.format == SFT if self.won_only is None else self.won_only


@dataclass
class ExportTally:
    episodes: int = 0  # read
    kept: int = 0  # passed the filters
    steps: int = 0  # of the kept episodes
    rows: int = 0
    searched_steps: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)  # episodes left out, by why

    def reached(self, limit: int | None) -> bool:
        return limit is not None and self.rows >= limit

    def skip(self, reason: str) -> None:
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1


def prompt_messages(example: Example, listed: bool = True) -> list[Message]:
    """[system, user] for a step: what θ reads, the candidates listed unless the state offered none."""
    lines = [f"Goal: {example.goal}", "", "Observation:", example.observation]
    if listed:
        lines += ["", "Candidate actions:", *(f"- {text}" for text, _ in example.candidates())]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def tool_call(action: str, tools: list[dict[str, Any]]) -> Message | None:
    """`action` as an assistant tool call (the form of TRL's tool-calling rows and OpenAI's API), its arguments
    bound to the schema's parameters; None when it is no call of one of `tools`."""
    try:
        name, positional, keywords = parse(action)
        function = next((t["function"] for t in tools if t["function"]["name"] == name), None)
        if function is None:
            return None
        arguments = bind(list(function["parameters"].get("properties", {})), positional, keywords, name)
    except CallError:
        return None
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def assistant(action: str, tools: list[dict[str, Any]] | None = None) -> list[Message]:
    """The answer: the action's text, or its tool call where `tools` are given and it is one."""
    call = tool_call(action, tools) if tools else None
    return [call or {"role": "assistant", "content": action}]


def preference_pairs(example: Example, q_margin: float = Q_MARGIN, per_state: int = 1) -> list[tuple[int, int]]:
    """(chosen, rejected) candidate indices of a searched step (see the module docstring); [] without search."""
    visited = np.flatnonzero(example.q_mask)
    if len(visited) < 2:
        return []
    probs, q = example.visit_probs, example.q_values
    chosen = int(max(visited, key=lambda i: (probs[i], q[i])))
    worse = [int(j) for j in visited if q[j] <= q[chosen] - q_margin]
    worse.sort(key=lambda j: (-probs[j], q[j]))
    return [(chosen, j) for j in worse[:per_state]]


def _source(episode: EpisodeCompleted, example: Example) -> Row:
    return {"episode_id": episode.episode_id, "step_index": example.step_index, "env": episode.env_spec}


def episode_rows(episode: EpisodeCompleted, options: ExportOptions, tools: list[dict[str, Any]] | None = None,
                 tally: ExportTally | None = None) -> Iterator[Row]:
    """The rows of one episode in `options.format` (no episode filter applied here)."""
    tally = tally if tally is not None else ExportTally()
    steps = {s.index: s for s in episode.steps}
    extra: Row = {"tools": tools} if tools else {}
    calls = tools if options.tool_calls else None
    for example in episode_examples(episode):
        step = steps[example.step_index]
        listed = len(step.target.actions) > 0  # else the action taken stands alone: listing it gives it away
        searched = bool(example.q_mask.any())
        tally.searched_steps += searched
        if options.format == SFT:
            if step.action.text:
                yield {"messages": [*prompt_messages(example, listed), *assistant(step.action.text, calls)],
                       **extra, **_source(episode, example)}
            continue
        for chosen, rejected in preference_pairs(example, options.q_margin, options.pairs_per_state):
            yield {"prompt": prompt_messages(example, listed), "chosen": assistant(example.actions[chosen], calls),
                   "rejected": assistant(example.actions[rejected], calls), **extra, **_source(episode, example),
                   "chosen_q": float(example.q_values[chosen]), "rejected_q": float(example.q_values[rejected]),
                   "chosen_visit_share": float(example.visit_probs[chosen]),
                   "rejected_visit_share": float(example.visit_probs[rejected])}


def _left_out(episode: EpisodeCompleted, options: ExportOptions) -> str | None:
    if options.fold is not None and episode.fold != options.fold:
        return f"not the {options.fold} fold"
    if options.env is not None and episode.env_spec != options.env:
        return f"not {options.env}"
    if options.wins_only and not episode.won:
        return "lost"
    return None


def export_rows(episodes: Iterable[EpisodeCompleted], options: ExportOptions, tools_of: ToolsOf | None = None,
                tally: ExportTally | None = None) -> Iterator[Row]:
    """Rows of the episodes that pass the filters, in order, at most `options.limit`."""
    tally = tally if tally is not None else ExportTally()
    for episode in episodes:
        if tally.reached(options.limit):
            return
        tally.episodes += 1
        why = _left_out(episode, options)
        if why is not None:
            tally.skip(why)
            continue
        tally.kept += 1
        tally.steps += len(episode.steps)
        tools = tools_of(episode) if tools_of is not None else None
        for row in episode_rows(episode, options, tools, tally):
            yield row
            tally.rows += 1
            if tally.reached(options.limit):
                return


def function_schema(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool in the form chat templates and TRL's ``tools`` column read (transformers' get_json_schema)."""
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": dict(parameters)}}


_NO_ARGUMENTS = {"type": "object", "properties": {}}
_META_PARAMETERS = {FINAL: {"type": "object", "properties": {"answer": {"description": "the answer"}}},
                    COMBINE: _NO_ARGUMENTS, ASK: _NO_ARGUMENTS}


def tool_schemas(tools: Iterable[ToolInfo]) -> list[dict[str, Any]]:
    """A tool task's ``tools`` column: its tools' schemas, then the meta actions every tool task offers."""
    rows = [function_schema(t.name, t.description, t.schema) for t in tools]
    return rows + [function_schema(name, help_text.split(": ", 1)[1], _META_PARAMETERS[name])
                   for name, help_text in META_HELP.items()]
