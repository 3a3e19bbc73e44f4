"""Experience units (seed 004 §2.1) <-> Qdrant points: idempotency keys, point ids, payloads, embedded text.

A point's id is a UUID derived from the experience's key, so storing the same step twice (a redelivered
event, a retried Store) overwrites the point instead of adding a duplicate.

A step is written twice on its way in: from `reward.scored` as soon as it is scored (outcome PENDING), and
from `episode.completed` with everything known only at the end (outcome, episode score, policy version,
cost). The two subjects are not ordered; the store keeps the complete version (see memory/store.py).
"""

from __future__ import annotations

import hashlib
import math
import uuid
from typing import Any

from evoskill.common.v1 import common_pb2
from evoskill.core.episode_record import steps_with_states
from evoskill.core.errors import InvalidInput
from evoskill.core.state_text import state_text
from evoskill.events.v1 import events_pb2
from evoskill.memory.v1 import memory_pb2

# Fixed namespace: point ids must be the same in every process and across restarts.
POINT_NAMESPACE = uuid.UUID("5b0f1f2e-6a53-4c1d-9a57-3f0e9b7a1c42")

_TEXT_FIELDS = ("goal", "state", "action", "template", "feedback", "env_spec", "env_family", "episode_id",
                "session_id", "policy_version", "agent")
_NUMBER_FIELDS = {"reward": float, "episode_score": float, "step_index": int, "env_steps": int, "time_unix_ms": int}
OUTCOMES = {memory_pb2.OUTCOME_PENDING: "pending", memory_pb2.OUTCOME_WON: "won", memory_pb2.OUTCOME_LOST: "lost"}
_OUTCOME_OF_NAME = {name: value for value, name in OUTCOMES.items()}


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


def env_family(env_spec: str) -> str:
    """The spec without its parameters: `twx:coin?numLocations=5` and `twx:coin` are one family."""
    return env_spec.split("?", 1)[0]


def reward_unit(reward: float) -> float:
    """The step's reward squashed into (-1, 1), so that a weight means the same whatever the reward's scale."""
    return math.tanh(reward)


def outcome_value(outcome: int, episode_score: float) -> float:
    """The episode's end as a number in [-1, 1]: won 1, pending 0, lost minus what it fell short of a full
    score (a lost episode that scored 0.8 of the task is nearly neutral, one that scored nothing is -1)."""
    if outcome == memory_pb2.OUTCOME_WON:
        return 1.0
    if outcome == memory_pb2.OUTCOME_LOST:
        return min(max(episode_score, 0.0), 1.0) - 1.0
    return 0.0


def check_experience(experience: memory_pb2.Experience, where: str = "experience") -> None:
    if not experience.goal and not experience.state:
        raise InvalidInput(f"{where}: goal and state are both empty: nothing to retrieve it by")
    if experience.step_index < 0:
        raise InvalidInput(f"{where}.step_index is negative ({experience.step_index})")
    if experience.env_steps < 0:
        raise InvalidInput(f"{where}.env_steps is negative ({experience.env_steps})")
    if experience.outcome not in OUTCOMES:
        raise InvalidInput(f"{where}.outcome is not an Outcome ({experience.outcome})")
    if not (math.isfinite(experience.reward) and math.isfinite(experience.episode_score)):
        raise InvalidInput(f"{where}: reward and episode_score must be finite numbers")


def to_payload(experience: memory_pb2.Experience) -> dict[str, Any]:
    """The point's payload: the unit's fields, plus what retrieval filters and scores by (the family, the
    outcome's name, the reward and the outcome as numbers in [-1, 1])."""
    payload: dict[str, Any] = {name: getattr(experience, name) for name in _TEXT_FIELDS}
    payload.update({name: kind(getattr(experience, name)) for name, kind in _NUMBER_FIELDS.items()})
    payload.update(
        id=experience_key(experience),
        env_family=experience.env_family or env_family(experience.env_spec),
        success=bool(experience.success),
        outcome=OUTCOMES[experience.outcome],
        reward_unit=reward_unit(experience.reward),
        outcome_value=outcome_value(experience.outcome, experience.episode_score),
        metadata=dict(experience.metadata),
        seed=experience.seed if experience.HasField("seed") else None,  # unknown until the episode's end
    )
    return payload


def from_payload(payload: dict[str, Any]) -> memory_pb2.Experience:
    """The unit back from a payload; fields a point of an earlier release lacks read as their defaults."""
    fields: dict[str, Any] = {name: str(payload.get(name, "")) for name in _TEXT_FIELDS}
    fields.update({name: kind(payload.get(name, 0)) for name, kind in _NUMBER_FIELDS.items()})
    return memory_pb2.Experience(
        id=str(payload.get("id", "")),
        success=bool(payload.get("success", False)),
        outcome=_OUTCOME_OF_NAME.get(str(payload.get("outcome", "pending")), memory_pb2.OUTCOME_PENDING),
        metadata={str(k): str(v) for k, v in (payload.get("metadata") or {}).items()},
        seed=None if payload.get("seed") is None else int(payload["seed"]),
        **fields,
    )


def _unit(before: common_pb2.Observation, action: common_pb2.Action, after: common_pb2.Observation,
          failure: common_pb2.Failure, **fields: Any) -> memory_pb2.Experience:
    """A real step as an experience: the state before the action, the action, the feedback after it."""
    if not action.text:
        raise InvalidInput("the step's action text is empty: not a step")
    goal, state = state_text(before)
    experience = memory_pb2.Experience(goal=goal or after.goal, state=state, action=action.text,
                                       template=action.template, feedback=after.text, **fields)
    experience.env_family = env_family(experience.env_spec)
    if failure.kind not in (common_pb2.FAILURE_KIND_UNSPECIFIED, common_pb2.FAILURE_KIND_NONE):
        experience.metadata["failure"] = common_pb2.FailureKind.Name(failure.kind)
    check_experience(experience, "step")
    experience.id = experience_key(experience)
    return experience


def experience_from_transition(transition: common_pb2.Transition, reward: float) -> memory_pb2.Experience:
    """A step as soon as it is scored: its episode's outcome is not known yet (`success`: the step won it)."""
    return _unit(transition.before, transition.action, transition.after, transition.failure,
                 reward=reward, success=transition.after.won, env_spec=transition.env_spec,
                 episode_id=transition.episode_id, step_index=transition.step_index)


def experiences_from_episode(episode: events_pb2.EpisodeCompleted) -> list[memory_pb2.Experience]:
    """Every step of a finished episode, complete: the same keys as the scored steps, with the outcome."""
    if not episode.episode_id:
        raise InvalidInput("episode_id is empty")
    outcome = memory_pb2.OUTCOME_WON if episode.won else memory_pb2.OUTCOME_LOST
    units = []
    for before, step in steps_with_states(episode):
        unit = _unit(before, step.action, step.observation, step.failure, reward=step.reward, success=episode.won,
                     env_spec=episode.env_spec, episode_id=episode.episode_id, step_index=step.index,
                     outcome=outcome, episode_score=episode.score, policy_version=episode.policy_version,
                     agent=episode.agent, env_steps=step.env_steps, seed=episode.seed)
        if step.llm.requests:  # what the LLM cost the step's decision, as the episode carried it
            unit.metadata.update(llm_requests=str(step.llm.requests), llm_prompt_tokens=str(step.llm.prompt_tokens),
                                 llm_completion_tokens=str(step.llm.completion_tokens),
                                 llm_cost_usd=f"{step.llm.cost_usd:.6g}")
        units.append(unit)
    return units
