"""Experience units (seed 004 §2.1) <-> Qdrant points: idempotency keys, point ids, payloads, embedded text.

A point's id is a UUID derived from the experience's key, so storing the same step twice (a redelivered
event, a retried Store) overwrites the point instead of adding a duplicate.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from evoskill.common.v1 import common_pb2
from evoskill.core.errors import InvalidInput
from evoskill.core.state_text import state_text
from evoskill.memory.v1 import memory_pb2

# Fixed namespace: point ids must be the same in every process and across restarts.
POINT_NAMESPACE = uuid.UUID("5b0f1f2e-6a53-4c1d-9a57-3f0e9b7a1c42")

_TEXT_FIELDS = ("goal", "state", "action", "template", "feedback", "env_spec", "episode_id")


def experience_key(experience: memory_pb2.Experience) -> str:
    """The idempotency key: the explicit id, else "<episode_id>/<step_index>", else a digest of the content."""
    if experience.id:
        return experience.id
    if experience.episode_id:
        return f"{experience.episode_id}/{experience.step_index}"
    content = "\x1f".join((experience.env_spec, experience.goal, experience.state, experience.action))
    return "sha1:" + hashlib.sha1(content.encode()).hexdigest()


def point_id(key: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, key))


def query_text(goal: str, state: str) -> str:
    """What is embedded, for stored experiences and queries alike: similar situations are similar goals and states."""
    return f"{goal}\n{state}".strip()


def check_experience(experience: memory_pb2.Experience, where: str = "experience") -> None:
    if not experience.goal and not experience.state:
        raise InvalidInput(f"{where}: goal and state are both empty: nothing to retrieve it by")
    if experience.step_index < 0:
        raise InvalidInput(f"{where}.step_index is negative ({experience.step_index})")


def to_payload(experience: memory_pb2.Experience) -> dict[str, Any]:
    payload: dict[str, Any] = {name: getattr(experience, name) for name in _TEXT_FIELDS}
    payload.update(
        id=experience_key(experience),
        reward=float(experience.reward),
        success=bool(experience.success),
        step_index=int(experience.step_index),
        metadata=dict(experience.metadata),
    )
    return payload


def from_payload(payload: dict[str, Any]) -> memory_pb2.Experience:
    return memory_pb2.Experience(
        id=str(payload.get("id", "")),
        **{name: str(payload.get(name, "")) for name in _TEXT_FIELDS},
        reward=float(payload.get("reward", 0.0)),
        success=bool(payload.get("success", False)),
        step_index=int(payload.get("step_index", 0)),
        metadata={str(k): str(v) for k, v in (payload.get("metadata") or {}).items()},
    )


def experience_from_transition(
    transition: common_pb2.Transition, reward: float, success: bool | None = None
) -> memory_pb2.Experience:
    """A real step as an experience: the state before the action, the action, the feedback after it.
    `success` is the episode's outcome when known, else the step's own `won`."""

    if not transition.action.text:
        raise InvalidInput("transition.action.text is empty: not a step")
    goal, state = state_text(transition.before)
    experience = memory_pb2.Experience(
        goal=goal or transition.after.goal,
        state=state,
        action=transition.action.text,
        template=transition.action.template,
        feedback=transition.after.text,
        reward=reward,
        success=transition.after.won if success is None else success,
        env_spec=transition.env_spec,
        episode_id=transition.episode_id,
        step_index=transition.step_index,
    )
    if transition.failure.kind not in (common_pb2.FAILURE_KIND_UNSPECIFIED, common_pb2.FAILURE_KIND_NONE):
        experience.metadata["failure"] = common_pb2.FailureKind.Name(transition.failure.kind)
    check_experience(experience, "transition")
    experience.id = experience_key(experience)
    return experience
