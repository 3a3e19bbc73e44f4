"""The one schema of limits on what crosses a service edge: every gRPC request (checked by
`platform.rpc` before the servicer runs) and every bus event (checked by `platform.bus` before the
handler runs) go through `check_message`, so no state is touched by a message that breaks them.

The limits, for any message type, walked field by field:
- every number finite and at most `MAX_MAGNITUDE` either side of 0 (a NaN reward or Q value would reach θ,
  the memory or a score; a huge one overflows to infinity in the first sum);
- strings within their field's length (ids and names short, actions a line, texts 256 KiB); seeds >= 0;
- repeated and map fields within a count;
- per message type, the rules below (`_RULES`): consistent lengths (a search target's statistics align with
  its actions), ranges (a step quota, a rollout depth) and non-negative probabilities.
A break is an `InvalidInput` naming the field by its path (`steps[3].target.q_values[2]`) and echoing at
most `ECHO_CHARS` of the value (`shown`).

Pure: protobuf messages in, `InvalidInput` out; the transports decide what a refusal means.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from evoskill.core.errors import InvalidInput

ECHO_CHARS = 64  # of any value an error message repeats
MAX_MAGNITUDE = 1e9  # of any number (rewards, scores and probabilities are far smaller; seconds too)
MESSAGE_CHARS = 1024  # of an error message as a whole (a gRPC status, a dead letter's reason)

MAX_ID = 256  # episode, session, request ids and policy versions
MAX_NAME = 64  # folds, agents, algorithms, map keys
MAX_SPEC = 1024  # an environment spec
MAX_ACTION = 1024  # one action's text or template
MAX_TEXT = 256 * 1024  # an observation, goal, feedback or reason
MAX_ITEMS = 65_536  # entries of any repeated or map field without a tighter limit
MAX_EPISODE_STEPS = 10_000  # steps of one episode (also the largest max_steps a request may ask)
MAX_PROBES = 4096  # probes of one Simulate call
MAX_PATH = 1024  # actions of one probe's path (search's max_depth is capped at this)
MAX_ROLLOUT = 1000  # random steps after a probe's path
MAX_STEP_QUOTA = 10_000_000  # environment steps one sandbox session may spend
MAX_EXPERIENCES = 4096  # experiences of one Store call
MAX_RETRIEVE = 1000  # results of one Retrieve call
MAX_RECALL = 10_000  # first-stage candidates of one Retrieve call
MAX_TRAIN_STEPS = 1_000_000  # gradient steps of one Train call
MAX_BATCH = 65_536  # examples of one gradient step
MAX_WAIT_S = 24 * 3600.0  # how long one call may wait for something to arrive

# Strings whose field name says what they hold (any message type); the rest may be texts.
_STRING_LIMITS = {
    **dict.fromkeys(("episode_id", "episode_ids", "session_id", "request_id", "id", "version", "policy_version",
                     "previous_version", "serving_version", "from_version", "consumer"), MAX_ID),
    **dict.fromkeys(("fold", "agent", "algorithm"), MAX_NAME),
    **dict.fromkeys(("env_spec", "subject"), MAX_SPEC),
    **dict.fromkeys(("action", "actions", "valid_actions", "gold_path", "template", "templates"), MAX_ACTION),
}
_ACTION_TEXT = ("evoskill.common.v1.Action", "text")  # the one `text` that is an action, not a text
_SEEDS = ("seed", "rollout_seed")  # random generators take no negative seed
_REPEATED_LIMITS = {"steps": MAX_EPISODE_STEPS, "probes": MAX_PROBES, "experiences": MAX_EXPERIENCES}
_FLOATS = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)
_STRINGS = (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES)


def shown(value: object, limit: int = ECHO_CHARS) -> str:
    """`value` as an error message may repeat it: its repr, cut to `limit` characters with its length said."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str | bytes) else ""
    return f"{text[:limit]}...{size}"


def bounded(message: str, limit: int = MESSAGE_CHARS) -> str:
    """A whole error message cut to `limit` characters (whatever it quotes)."""
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message)} characters)"


def finite(value: float, name: str) -> float:
    if not (math.isfinite(value) and abs(value) <= MAX_MAGNITUDE):
        raise InvalidInput(f"{name} is {shown(value)}, not a finite number of at most {MAX_MAGNITUDE:g} in magnitude")
    return value


def in_range(value: float, low: float, high: float, name: str) -> None:
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be in [{_number(low)}, {_number(high)}], got {shown(value)}")


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def check_message(message: Message, where: str = "") -> None:
    """Every limit above on `message` and everything in it; `where` prefixes the field paths."""
    descriptor = message.DESCRIPTOR
    for field, value in message.ListFields():
        name = f"{where}.{field.name}" if where else field.name
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            _check_map(field, value, name)
        elif field.is_repeated:
            _check_repeated(descriptor.full_name, field, value, name)
        else:
            _check_value(descriptor.full_name, field, value, name)
    rule = _RULES.get(descriptor.full_name)
    if rule is not None:
        rule(message, where)


def _check_value(owner: str, field: FieldDescriptor, value: Any, name: str) -> None:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        check_message(value, name)
    elif field.type in _FLOATS:
        finite(value, name)
    elif field.type in _STRINGS:
        _check_length(owner, field, value, name)
    elif field.name in _SEEDS and value < 0:
        raise InvalidInput(f"{name} must be >= 0, got {value}")


def _limit(owner: str, field: FieldDescriptor) -> int:
    return MAX_ACTION if (owner, field.name) == _ACTION_TEXT else _STRING_LIMITS.get(field.name, MAX_TEXT)


def _check_length(owner: str, field: FieldDescriptor, value: str | bytes, name: str) -> None:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return  # payloads: bounded by the message size the transport takes
    if len(value) > (limit := _limit(owner, field)):
        raise InvalidInput(f"{name} is {len(value)} characters, over the limit of {limit}: {shown(value)}")


def _check_repeated(owner: str, field: FieldDescriptor, values: Any, name: str) -> None:
    limit = _REPEATED_LIMITS.get(field.name, MAX_ITEMS)
    if len(values) > limit:
        raise InvalidInput(f"{name} has {len(values)} entries, over the limit of {limit}")
    if field.type in _FLOATS:
        array = np.fromiter(values, np.float64, len(values))
        bad = ~(np.abs(array) <= MAX_MAGNITUDE)  # NaN compares False
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            finite(float(array[i]), f"{name}[{i}]")
    elif field.type == FieldDescriptor.TYPE_STRING:
        lengths = list(map(len, values))
        if max(lengths) > _limit(owner, field):
            longest = lengths.index(max(lengths))
            _check_length(owner, field, values[longest], f"{name}[{longest}]")
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        for i, item in enumerate(values):
            check_message(item, f"{name}[{i}]")


def _check_map(field: FieldDescriptor, entries: Any, name: str) -> None:
    if len(entries) > MAX_ITEMS:
        raise InvalidInput(f"{name} has {len(entries)} entries, over the limit of {MAX_ITEMS}")
    entry = field.message_type
    assert entry is not None  # a map field's entry type
    value_field = entry.fields_by_name["value"]
    for key, value in entries.items():
        if isinstance(key, str) and len(key) > MAX_NAME:
            raise InvalidInput(f"{name} has a key of {len(key)} characters, over the limit of {MAX_NAME}: "
                               f"{shown(key)}")
        _check_value(entry.full_name, value_field, value, f"{name}[{shown(key)}]")


# -- rules per message type (after its fields passed) ----------------------------------------------------

def _search_target(target: Any, where: str) -> None:
    n = len(target.actions)
    for name in ("visit_probs", "q_values", "priors", "templates", "seen", "policy_probs"):
        got = len(getattr(target, name))
        if got not in (0, n):
            raise InvalidInput(f"{where}.{name} has {got} entries for {n} actions (give one per action, or none)")
    for name in ("visit_probs", "priors", "policy_probs"):
        values = getattr(target, name)
        if values and min(values) < 0:
            raise InvalidInput(f"{where}.{name} holds a negative probability ({min(values)})")


def _transition(transition: Any, where: str) -> None:
    if transition.step_index < 0:
        raise InvalidInput(f"{where}.step_index is negative ({transition.step_index})")


def _create_session(request: Any, where: str) -> None:
    in_range(request.step_quota, 0, MAX_STEP_QUOTA, "step_quota (0 = the service default)")


def _probe(probe: Any, where: str) -> None:
    if len(probe.actions) > MAX_PATH:
        raise InvalidInput(f"{where}.actions has {len(probe.actions)} entries, over the limit of {MAX_PATH}")
    in_range(probe.rollout_depth, 0, MAX_ROLLOUT, f"{where}.rollout_depth")


def _play_episode(request: Any, where: str) -> None:
    in_range(request.max_steps, 0, MAX_EPISODE_STEPS, "max_steps (0 = the service default)")


def _retrieve(request: Any, where: str) -> None:
    # Below 0 is the memory service's to refuse (it says what 0 means); above, these limits'.
    if request.limit > MAX_RETRIEVE or request.recall > MAX_RECALL:
        raise InvalidInput(f"limit ({request.limit}) and recall ({request.recall}) may be at most {MAX_RETRIEVE} "
                           f"and {MAX_RECALL}")


def _train(request: Any, where: str) -> None:
    in_range(request.steps, 1, MAX_TRAIN_STEPS, "steps")
    in_range(request.batch_size, 0, MAX_BATCH, "batch_size (0 = the learner's setting)")
    if request.HasField("online_fraction"):
        in_range(request.online_fraction, 0.0, 1.0, "online_fraction")
    in_range(request.wait_seconds, 0.0, MAX_WAIT_S, "wait_seconds")
    if any(not eid for eid in request.episode_ids):
        raise InvalidInput("episode_ids holds an empty id")


_RULES: dict[str, Callable[[Any, str], None]] = {
    "evoskill.events.v1.SearchTarget": _search_target,
    "evoskill.common.v1.Transition": _transition,
    "evoskill.sandbox.v1.CreateSessionRequest": _create_session,
    "evoskill.sandbox.v1.Probe": _probe,
    "evoskill.planner.v1.PlayEpisodeRequest": _play_episode,
    "evoskill.memory.v1.RetrieveRequest": _retrieve,
    "evoskill.learner.v1.TrainRequest": _train,
}
