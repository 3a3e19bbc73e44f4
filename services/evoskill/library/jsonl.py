"""The library's JSONL form: one episode per line (docs/library.md), and the one converter between it
and `EpisodeCompleted`.

This module is the only place that maps a record onto the proto (core/episode_record.py lays out the
proto's steps): `evoskill demos` and `evoskill library` go through `to_record` / `from_record`. A line
is checked against `EpisodeRecord` before it becomes a proto, and a bad one is named by its line number
and field (`LibraryFormatError`).

What a record keeps is what θ reads (core/learn/data.py): each state's text (feedback, room,
inventory, goal), its candidate actions with their templates and `seen` marks, the action taken, the
reward and the search statistics where there were any. The notes (core/state_text.py) are derived from
the steps when θ reads them, so they need no field of their own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, model_validator

from evoskill.common.v1 import common_pb2
from evoskill.core.agent import AgentKind
from evoskill.core.episode_record import record_step, steps_with_states
from evoskill.events.v1 import events_pb2

SCHEMA = 1
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]  # a JSON number (an int is one too)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Search(_Strict):
    """The search's statistics at the step's root, aligned with the step's `valid_actions`."""

    visit_probs: list[Number]
    q_values: list[Number] = Field(default_factory=list)
    priors: list[Number] = Field(default_factory=list)
    root_value: Number = 0.0


class Feedback(_Strict):
    """What the agent read: the feedback of the last action, and the room and inventory where given."""

    observation: StrictStr
    look: StrictStr = ""
    inventory: StrictStr = ""


class Step(Feedback):
    """A state (its feedback and candidates), what was done there and what came of it (`reward`, and the
    environment's `score` and `done` after the action)."""

    valid_actions: list[StrictStr] = Field(default_factory=list)
    templates: list[StrictStr] = Field(default_factory=list)  # empty = unknown (derived from the action text)
    seen: list[StrictBool] = Field(default_factory=list)  # empty = unknown (no candidate marked)
    action: StrictStr = Field(min_length=1)
    template: StrictStr = ""
    reward: Number
    score: Number
    done: StrictBool
    search: Search | None = None

    @model_validator(mode="after")
    def _aligned(self) -> Step:
        n = len(self.valid_actions)
        for name in ("templates", "seen"):
            got = len(getattr(self, name))
            if got and got != n:
                raise ValueError(f"{name} has {got} entries for {n} valid_actions")
        if self.search is not None:
            for name in ("visit_probs", "q_values", "priors"):
                got = len(getattr(self.search, name))
                if (got or name == "visit_probs") and got != n:
                    raise ValueError(f"search.{name} has {got} entries for {n} valid_actions")
        return self


class EpisodeRecord(_Strict):
    """One line of a library file."""

    schema_: Literal[1] = Field(1, alias="schema")  # SCHEMA
    episode_id: StrictStr = ""  # empty: derived from the line's content (importing it twice stores it once)
    env: StrictStr = Field(min_length=1)
    seed: StrictInt
    fold: Literal["train", "dev", "test"]
    goal: StrictStr = ""
    agent: StrictStr = AgentKind.DEMO.value
    policy_version: StrictStr = ""
    won: StrictBool
    score: Number
    total_reward: Number | None = None  # None: the sum of the steps' rewards
    env_steps: StrictInt | None = Field(None, ge=0)  # None: one per step
    steps: list[Step] = Field(min_length=1)
    final: Feedback | None = None  # what the last action answered

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class LibraryFormatError(ValueError):
    """A library line that is not a valid episode record; says which line and field."""


def _observation(feedback: Feedback, goal: str, valid: list[str], score: float = 0.0, done: bool = False,
                 won: bool = False) -> common_pb2.Observation:
    return common_pb2.Observation(text=feedback.observation, look=feedback.look, inventory=feedback.inventory,
                                  valid_actions=valid, goal=goal, score=score, done=done, won=won,
                                  lost=done and not won)


def from_record(record: EpisodeRecord, episode_id: str = "") -> events_pb2.EpisodeCompleted:
    """The episode a record describes (`episode_id` stands in for an empty one)."""
    eid = record.episode_id or episode_id
    episode = events_pb2.EpisodeCompleted(
        episode_id=eid, env_spec=record.env, seed=record.seed, fold=record.fold, agent=record.agent,
        policy_version=record.policy_version, score=record.score, won=record.won,
        env_steps=len(record.steps) if record.env_steps is None else record.env_steps)
    previous_score = 0.0
    for i, step in enumerate(record.steps):
        last = i == len(record.steps) - 1
        after: Feedback = (record.final or Feedback(observation="")) if last else record.steps[i + 1]
        transition = common_pb2.Transition(
            episode_id=eid, step_index=i, env_spec=record.env,
            before=_observation(step, record.goal, step.valid_actions, previous_score),
            after=_observation(after, record.goal, [], step.score, step.done, record.won and last),
            action=common_pb2.Action(text=step.action, template=step.template), env_reward=step.score - previous_score,
            failure=common_pb2.Failure(kind=common_pb2.FAILURE_KIND_NONE))
        target = events_pb2.SearchTarget(actions=step.valid_actions, templates=step.templates, seen=step.seen)
        if step.search is not None:
            target.visit_probs.extend(step.search.visit_probs)
            target.q_values.extend(step.search.q_values)
            target.priors.extend(step.search.priors)
            target.root_value = step.search.root_value
        record_step(episode, transition, target, step.reward)
        previous_score = step.score
    episode.total_reward = sum(s.reward for s in record.steps) if record.total_reward is None else record.total_reward
    return episode


def _feedback(observation: common_pb2.Observation) -> dict[str, str]:
    return {k: v for k, v in (("observation", observation.text), ("look", observation.look),
                               ("inventory", observation.inventory)) if v or k == "observation"}


def to_record(episode: events_pb2.EpisodeCompleted) -> dict[str, Any]:
    """An episode as one library line (a JSON object; optional fields at their defaults are left out)."""
    steps: list[dict[str, Any]] = []
    for before, step in steps_with_states(episode):
        target, actions = step.target, list(step.target.actions)
        row: dict[str, Any] = {**_feedback(before), "valid_actions": actions}
        if len(target.templates) == len(actions):
            row["templates"] = list(target.templates)
        if len(target.seen) == len(actions):
            row["seen"] = list(target.seen)
        row.update(action=step.action.text, template=step.action.template, reward=step.reward,
                   score=step.observation.score, done=step.observation.done)
        if len(target.visit_probs) == len(actions) and actions:
            row["search"] = {"visit_probs": list(target.visit_probs), "q_values": list(target.q_values),
                             "priors": list(target.priors), "root_value": target.root_value}
        steps.append({k: v for k, v in row.items() if k in ("observation", "action") or v not in ("", [])})
    record = {"schema": SCHEMA, "episode_id": episode.episode_id, "env": episode.env_spec, "seed": episode.seed,
              "fold": episode.fold, "goal": episode.initial.goal, "agent": episode.agent,
              "policy_version": episode.policy_version, "won": episode.won, "score": episode.score,
              "total_reward": episode.total_reward, "env_steps": episode.env_steps, "steps": steps}
    if episode.steps:
        record["final"] = _feedback(episode.steps[-1].observation)
    return {k: v for k, v in record.items() if k not in ("goal", "policy_version") or v}


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(line)"


def parse_line(text: str, where: str) -> events_pb2.EpisodeCompleted:
    """One library line as an episode; `where` names it in errors ("file.jsonl line 7")."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LibraryFormatError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise LibraryFormatError(f"{where}: expected a JSON object (one episode), got {type(data).__name__}")
    try:
        record = EpisodeRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(p for p in first["loc"] if p not in ("function-after[_aligned(), Step]",))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise LibraryFormatError(f"{where}: {_field(loc)}: {first['msg']}{more}") from None
    content_id = "import:" + hashlib.blake2b(text.strip().encode(), digest_size=12).hexdigest()
    return from_record(record, content_id)


def read_jsonl(path: Path) -> Iterator[events_pb2.EpisodeCompleted]:
    """Every episode of a library file, in order; blank lines are skipped. Raises LibraryFormatError at the
    first bad line."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield parse_line(line, f"{path} line {number}")


def write_jsonl(episodes: Iterable[events_pb2.EpisodeCompleted], out: TextIO) -> int:
    """Write each episode as one line; returns how many."""
    n = 0
    for episode in episodes:
        out.write(json.dumps(to_record(episode), ensure_ascii=False) + "\n")
        n += 1
    return n
