"""What the learner learns from, and the arrays the network takes.

An `EpisodeCompleted` from the planner becomes one `Example` per step: the state as text, the
candidate actions and their skills (templates), the search's visit distribution and Q values, and
the discounted return. Steps without search statistics (demonstrations, gold paths in the offline
library) become imitation examples: a one-hot visit distribution on the action taken, no Q values. A
demonstrated action the environment did not list (ScienceWorld's "pick up seed jar") becomes a candidate of
its own step: θ learns to choose it, and the planner offers it where the state names its objects
(core/search/demonstrated.py).

`make_inputs` turns states and candidates into padded arrays (text vectors for the MLP encoder, token
ids for the reader, see `tokens`); the learner's batches and the planner's `PolicyScorer` both go
through it, so training and serving see identical features.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.episode_record import steps_with_states
from evoskill.core.learn.features import Featurizer
from evoskill.core.learn.tokens import TokenFeaturizer, TokenInputs
from evoskill.core.rooms import RoomMap, room_of
from evoskill.core.state_text import (
    MAX_RECENT,
    candidate_text,
    notes_after,
    scored_before,
    state_text,
    with_recent,
)
from evoskill.envs.base import heuristic_template
from evoskill.events.v1.events_pb2 import EpisodeCompleted, SearchTarget

TemplateFn = Callable[[str], str]
_WORDS = re.compile(r"[a-z0-9]+")


def listed_equivalent(action: str, listed: Sequence[str]) -> int:
    """Index of the listed action that names what unlisted `action` does, -1 if none or several.

    Gold paths say actions the valid-action lists word differently: ScienceWorld's "focus on hatchling turtle
    in outside" is listed as "focus on hatchling hatchling turtle", "activate stopwatch in inventory" as
    "activate stopwatch". Left unmatched, the step has nothing to imitate, and θ never learns the task's key
    steps (3 of identify-life-stages' 4 focus steps). A listed action matches when its words are, as a set,
    those of a leading part of `action` of at least two words (verb and object): a trailing qualifier may be
    dropped, never a word inside ("move seed jar" is not "move pea seed in seed jar to flower pot 1"). The
    longest such part wins; a tie matches nothing."""
    words = _WORDS.findall(action.lower())
    prefixes = {frozenset(words[:k]): k for k in range(2, len(words) + 1)}
    best, index = 0, -1
    for i, text in enumerate(listed):
        k = prefixes.get(frozenset(_WORDS.findall(text.lower())), 0)
        if k > best:
            best, index = k, i
        elif k and k == best:
            index = -1
    return index


@dataclass(frozen=True)
class Example:
    """One real step, as the losses need it. Arrays are aligned with `actions`."""

    episode_id: str
    step_index: int
    goal: str
    observation: str
    actions: tuple[str, ...]
    templates: tuple[str, ...]
    visit_probs: np.ndarray  # θ's policy target (sums to 1): the search's improved policy where it gave one
    # (Gumbel), else its visit distribution; one-hot on `taken` without search
    q_values: np.ndarray  # search Q(s, a); meaningful where q_mask
    q_mask: np.ndarray  # actions the search visited (their Q is an estimate, not a default 0)
    root_value: float  # the search's V(s); nan without search
    taken: int  # index of the executed action in `actions`; -1 if it is not among them
    ret: float  # discounted return to the episode's end, in reward units (the scale of search's Q and leaf values)
    skills: tuple[str, ...] = field(default=())  # templates used in the episode if it succeeded, else ()
    seen: tuple[bool, ...] = field(default=())  # per action: leads back to a visited state; () = unknown
    # (observation text, action taken, next observation text): what the learner's dynamics model fits
    # (core/reward/curiosity.py); () = unknown
    transition: tuple[str, ...] = field(default=())
    leads: tuple[tuple[str, ...], ...] = field(default=())  # per action: the known rooms it leads to (core/rooms.py)
    recent: tuple[str, ...] = field(default=())  # the episode's last actions before this step (≤ MAX_RECENT)
    scored: tuple[str, ...] = field(default=())  # the episode's actions before this step that raised the score
    unlisted: bool = False  # `taken` is a demonstration's action the environment did not list, added last

    def state(self, recent: int = 0) -> tuple[str, str]:
        """(goal text, observation text) θ reads, with the `recent` last actions where its NetConfig says so."""
        return self.goal, with_recent(self.observation, self.recent[-recent:] if recent else ())

    def candidates(self, keep: Sequence[int] | np.ndarray | None = None, rooms: bool = False,
                   scored: bool = False) -> list[tuple[str, str]]:
        """(text θ reads, template) of the candidates at `keep` (all by default), marked as in serving; with
        `rooms`, with the rooms each leads to (a θ whose NetConfig.room_marks is on); with `scored`, where an
        action of their kind raised the score before (NetConfig.scored_marks)."""
        rows = range(len(self.actions)) if keep is None else keep
        n = len(self.actions)
        seen = self.seen if len(self.seen) == n else (False,) * n
        leads = self.leads if rooms and len(self.leads) == n else ((),) * n
        marks = scored_before(self.actions, self.scored) if scored else [False] * n
        return [(candidate_text(self.actions[i], seen[i], leads[i], marks[i]), self.templates[i]) for i in rows]


def searched(target: SearchTarget, n: int) -> bool:
    """The step's target holds a search's visits over its `n` candidates."""
    return len(target.visit_probs) == n and sum(target.visit_probs) > 0


def changed(before: Observation, after: Observation, notes_before: str, notes: str) -> bool:
    """A step changed the room, the inventory or the notes: ScienceWorld's gold paths open doors already open
    ("open door to kitchen", unlisted there), a no-op the planner would never offer."""
    return before.look != after.look or before.inventory != after.inventory or notes_before != notes


def unlisted_candidate(target: SearchTarget, action: str, template: str) -> SearchTarget:
    """`target` with `action` appended as its last candidate: the templates and seen marks kept aligned where
    they were (it has not been seen: it was never stepped as a candidate)."""
    grown = SearchTarget()
    grown.CopyFrom(target)
    n = len(target.actions)
    grown.actions.append(action)
    if len(target.templates) == n:
        grown.templates.append(template)
    if len(target.seen) == n:
        grown.seen.append(False)
    return grown


def episode_examples(
    episode: EpisodeCompleted, gamma: float = 0.97, template_of: TemplateFn = heuristic_template
) -> list[Example]:
    """One example per step of `episode`; steps with no candidate actions are dropped.

    Candidates are the step's target actions (the state's valid actions; the search's statistics where it
    searched), else the executed action alone; an unsearched step's action the list does not name (nor a
    listed equivalent) is appended to them. Templates come from the target where the planner recorded
    them, else the executed action's from the step and the others' from `template_of`.
    """
    returns: list[float] = []
    ret = 0.0
    for step in reversed(episode.steps):
        ret = step.reward + gamma * ret
        returns.append(ret)
    returns.reverse()
    taken_templates = [s.action.template or template_of(s.action.text) for s in episode.steps]
    skills = tuple(dict.fromkeys(t for t in taken_templates if t)) if episode.won else ()

    examples: list[Example] = []
    notes = ""  # what the agent has read so far, as the planner tracked it while playing
    rooms = RoomMap()  # the rooms it has walked through, as the planner's EpisodeMemory keeps them
    taken_so_far: list[str] = []  # the actions before each step, as EpisodeMemory.taken
    scored_so_far: list[str] = []  # the ones of them that raised the score, as EpisodeMemory.scored
    for (before, step), ret, taken_template in zip(steps_with_states(episode), returns, taken_templates, strict=True):
        target, taken_text = step.target, step.action.text
        notes_before, notes = notes, notes_after(notes, taken_text, step.observation.text)
        room = room_of(before)
        leads = tuple(rooms.leads(room, target.actions or (taken_text,)))
        rooms.learn(room, taken_text, room_of(step.observation))
        recent, scored = tuple(taken_so_far[-MAX_RECENT:]), tuple(scored_so_far)
        taken_so_far.append(taken_text)
        if step.observation.score > before.score:
            scored_so_far.append(taken_text)
        actions = tuple(target.actions)
        if not actions and taken_text:
            actions = (taken_text,)
        if not actions:
            continue
        taken = actions.index(taken_text) if taken_text in actions else listed_equivalent(taken_text, actions)
        unlisted = (taken < 0 and bool(taken_text) and not searched(target, len(actions)) and not step.exploration
                    and changed(before, step.observation, notes_before, notes))
        if unlisted:  # a demonstration's own action, which the list never names: a candidate of its step
            actions, taken = (*actions, taken_text), len(actions)
            target = unlisted_candidate(target, taken_text, taken_template)
            leads = (*leads, ()) if leads else ()  # as known before the step: it leads to no room known then
        if len(target.templates) == len(actions):
            templates = tuple(target.templates)  # the environment's own templates, from the planner
        else:
            templates = tuple(taken_template if a == taken_text else template_of(a) for a in actions)
        n = len(actions)
        if searched(target, n):
            visits = np.asarray(target.visit_probs, dtype=np.float32)
            visits /= visits.sum()
            q = np.asarray(target.q_values, dtype=np.float32) if len(target.q_values) == n else np.zeros(n, np.float32)
            q_mask = (visits > 0) & (len(target.q_values) == n)
            root_value = float(target.root_value)
            if len(target.policy_probs) == n and sum(target.policy_probs) > 0:  # Gumbel: the improved policy
                visits = np.asarray(target.policy_probs, dtype=np.float32) / np.float32(sum(target.policy_probs))
        elif step.exploration:
            continue  # unsearched and explored (e.g. ε's random pick): its action says nothing of what θ should do
        elif taken >= 0:
            visits = np.zeros(n, np.float32)
            visits[taken] = 1.0
            q, q_mask, root_value = np.zeros(n, np.float32), np.zeros(n, bool), math.nan
        else:
            continue  # nothing to imitate and nothing searched
        goal, observation = state_text(before, notes_before)
        examples.append(
            Example(
                episode_id=episode.episode_id,
                step_index=step.index,
                goal=goal,
                observation=observation,
                actions=actions,
                templates=templates,
                visit_probs=visits,
                q_values=q,
                q_mask=q_mask,
                root_value=root_value,
                taken=taken,
                ret=ret,
                skills=skills,
                seen=tuple(target.seen) if len(target.seen) == n else (),
                transition=(before.text, taken_text, step.observation.text),
                leads=leads if len(leads) == n else (),
                recent=recent,
                scored=scored,
                unlisted=unlisted,
            )
        )
    return examples


class PolicyInputs(NamedTuple):
    """The network's inputs for B states with up to A candidates each (padding where mask is False)."""

    state_feat: np.ndarray  # [B, 2*D] float32: goal features, then observation features
    action_feat: np.ndarray  # [B, A, D] float32
    template_ids: np.ndarray  # [B, A] int64; 0 (unknown skill) on padding
    mask: np.ndarray  # [B, A] bool: a real candidate


TextEncoder = Featurizer | TokenFeaturizer  # text -> vectors (mlp encoder) or -> tokens (reader)
Inputs = PolicyInputs | TokenInputs


def make_inputs(
    featurizer: TextEncoder,
    template_id: Callable[[str], int],
    states: Sequence[tuple[str, str]],
    candidates: Sequence[Sequence[tuple[str, str]]],
) -> Inputs:
    """Featurise `states` [(goal, observation)] and their `candidates` [[(action text, template)]]."""
    if isinstance(featurizer, TokenFeaturizer):
        return featurizer.make_inputs(template_id, states, candidates)
    b = len(states)
    width = max([1, *(len(c) for c in candidates)])  # at least one column so shapes stay valid
    dim = featurizer.dim
    # One encode call per batch: the cache dedups, and a model featuriser batches the misses.
    texts = [g for g, _ in states] + [o for _, o in states] + [a for c in candidates for a, _ in c]
    feats = featurizer.encode(texts) if texts else np.zeros((0, dim), np.float32)
    state_feat = np.concatenate([feats[:b], feats[b : 2 * b]], axis=1)
    action_feat = np.zeros((b, width, dim), np.float32)
    template_ids = np.zeros((b, width), np.int64)
    mask = np.zeros((b, width), bool)
    row = 2 * b
    for i, cands in enumerate(candidates):
        k = len(cands)
        action_feat[i, :k] = feats[row : row + k]
        template_ids[i, :k] = [template_id(t) for _, t in cands]
        mask[i, :k] = True
        row += k
    return PolicyInputs(state_feat.astype(np.float32, copy=False), action_feat, template_ids, mask)


def softmax_rows(logits: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    """Per-state distribution over its real candidates (a float32 array of length A_i each)."""
    out: list[np.ndarray] = []
    for row, valid in zip(logits, mask, strict=True):
        x = row[valid].astype(np.float64)
        if x.size == 0:
            out.append(np.zeros(0, np.float32))
            continue
        e = np.exp(x - x.max())
        out.append((e / e.sum()).astype(np.float32))
    return out
