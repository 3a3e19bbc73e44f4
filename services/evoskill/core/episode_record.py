"""An episode as `episode.completed` carries it: each step once (see EpisodeStep in events.proto).

The planner writes it with `record_step` from the sandbox's transitions; readers (the learner's
examples) walk it with `steps_with_states`, which gives back the state each step was taken in.
"""

from __future__ import annotations

from collections.abc import Iterator

from evoskill.common.v1.common_pb2 import LlmUsage, Observation, Transition
from evoskill.events.v1.events_pb2 import EpisodeCompleted, EpisodeStep, SearchTarget


def _without_actions(observation: Observation) -> Observation:
    """The observation without its valid actions: the next step's target lists them."""
    out = Observation()
    out.CopyFrom(observation)
    del out.valid_actions[:]
    return out


def record_step(episode: EpisodeCompleted, transition: Transition, target: SearchTarget,
                reward: float, env_steps: int = 1, llm: LlmUsage | None = None) -> EpisodeStep:
    """Append one real step (`env_steps`: what it cost, search's steps included; `llm`: what the LLM cost
    deciding it, added to the episode's). The first records the episode's initial observation; the target's
    actions default to the state's valid actions, so that every step lists its candidates once."""
    if not episode.steps:
        episode.initial.CopyFrom(_without_actions(transition.before))
    step = episode.steps.add(index=transition.step_index, action=transition.action, reward=reward,
                             observation=_without_actions(transition.after), env_reward=transition.env_reward,
                             failure=transition.failure, target=target, env_steps=env_steps)
    if not step.target.actions:
        step.target.actions.extend(transition.before.valid_actions)
    if llm is not None:
        step.llm.CopyFrom(llm)
        total = episode.llm
        total.requests += llm.requests
        total.cached += llm.cached
        total.failures += llm.failures
        total.prompt_tokens += llm.prompt_tokens
        total.completion_tokens += llm.completion_tokens
        total.cost_usd += llm.cost_usd
    return step


def steps_with_states(episode: EpisodeCompleted) -> Iterator[tuple[Observation, EpisodeStep]]:
    """Each step with the state it was taken in (its valid actions are the step's target.actions)."""
    before = episode.initial
    for step in episode.steps:
        yield before, step
        before = step.observation
