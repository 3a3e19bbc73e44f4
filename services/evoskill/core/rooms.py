"""The rooms an episode has walked through, as θ reads them (torch-free).

A greedy θ knows the room it is in but keeps no map: carrying a cooked meal three rooms from the kitchen, it
walks `move east`, `move west`, … until the step limit, and a small search cannot plan a walk of several
rooms. So the episode keeps one: each real step that changed the room is an exit (room, action) -> room,
and, for compass moves, the way back (`move west` undoes `move east`). A candidate that is the first step of
the shortest known walk to some rooms is marked with them, " (leads to backyard, kitchen)", which θ's
reader matches against the goal's and the notes' words ("check the cookbook in the kitchen").

Only what the episode saw: the map grows with the real steps (and, inside search, with the path's own
steps, as if they were real), never from a lookahead, so the learner builds the same marks from a logged
trajectory as the planner does while playing. A room is read from the environment's own phrasing
(TextWorldExpress, TextWorld, ScienceWorld); where none matches, nothing is marked.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from evoskill.common.v1.common_pb2 import Observation

ROOM_PATTERNS = (
    re.compile(r"^-= (.+?) =-", re.M),  # TextWorld: "-= Spare Room =-"
    re.compile(r"This (?:room|outside location) is called the ([^.\n]+)\."),  # ScienceWorld
    re.compile(r"^You are in (?:the |a |an )?([^.\n]+)\.", re.M),  # TextWorldExpress
)
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east", "up": "down", "down": "up",
            "northeast": "southwest", "southwest": "northeast", "northwest": "southeast", "southeast": "northwest"}
MAX_MARKED_ROOMS = 3  # a candidate names at most this many rooms (the nearest first)


def room_of(observation: Observation) -> str:
    """The room `observation` is in ("" = it does not say): from the room's description, else the feedback."""
    for text in (observation.look, observation.text):
        for pattern in ROOM_PATTERNS:
            if text and (found := pattern.search(text)):
                return found.group(1).strip().lower()
    return ""


def way_back(action: str) -> str:
    """The action that undoes a compass move (`move east` -> `move west`); "" where `action` names no one
    direction."""
    words = action.split()
    turns = [i for i, w in enumerate(words) if w.lower() in OPPOSITE]
    if len(turns) != 1:
        return ""
    words[turns[0]] = OPPOSITE[words[turns[0]].lower()]
    return " ".join(words)


@dataclass
class RoomMap:
    exits: dict[str, dict[str, str]] = field(default_factory=dict)  # room -> action -> the room it led to
    # Derived from `exits`, kept as it grows: `destination` runs for every candidate of every real step.
    _rooms: set[str] = field(default_factory=set, init=False, repr=False)  # every room the map names
    _verbs: set[str] = field(default_factory=set, init=False, repr=False)  # "go to " where "go to X" entered X

    def __post_init__(self) -> None:
        for before, exits in self.exits.items():
            for action, after in exits.items():
                self._index(before, action, after)

    def _index(self, before: str, action: str, after: str) -> None:
        self._rooms.update((before, after))
        if len(action) > len(after) and action.endswith(" " + after):
            self._verbs.add(action[: -len(after)])

    def learn(self, before: str, action: str, after: str) -> None:
        """One step: `action` taken in room `before` ended in room `after` ("" = unknown)."""
        if not before or not after or before == after:
            return
        self.exits.setdefault(before, {})[action] = after
        self._index(before, action, after)
        if back := way_back(action):  # assumed until seen otherwise: a step seen later overwrites it
            self.exits.setdefault(after, {}).setdefault(back, before)
            self._index(after, back, self.exits[after][back])

    def destination(self, room: str, action: str) -> str:
        """Where `action` leads from `room` ("" = unknown): the exit seen, else, in a game whose moves name the
        room they enter (ScienceWorld's "go to kitchen" entered the kitchen), a room the map knows named by the
        same words ("go to greenhouse", walked the other way or from elsewhere)."""
        if to := self.exits.get(room, {}).get(action, ""):
            return to
        for verb in self._verbs:
            if action.startswith(verb) and (named := action[len(verb):]) in self._rooms and named != room:
                return named
        return ""

    def copy(self) -> RoomMap:
        return RoomMap({room: dict(exits) for room, exits in self.exits.items()})

    def leads(self, room: str, actions: Sequence[str]) -> list[tuple[str, ...]]:
        """Per action in `room`: the known rooms whose shortest known walk from `room` begins with it, the
        nearest first (breadth first, in the order the exits were learned)."""
        first: dict[str, str] = {}  # room reached -> the first action of the walk to it
        queue = deque((to, action) for action, to in self.exits.get(room, {}).items())
        seen = {room}
        while queue:
            at, action = queue.popleft()
            if at in seen:
                continue
            seen.add(at)
            first[at] = action
            queue.extend((to, action) for to in self.exits.get(at, {}).values())
        by_action: dict[str, list[str]] = {}
        for reached, action in first.items():
            by_action.setdefault(action, []).append(reached)
        return [tuple(by_action.get(a, ())[:MAX_MARKED_ROOMS]) for a in actions]


def leads_mark(rooms: Sequence[str]) -> str:
    """The text a candidate carries for the rooms it leads to ("" = none known)."""
    return f" (leads to {', '.join(rooms)})" if rooms else ""

