"""Offline-library lines for tests of what reads a library: real `EpisodeCompleted` records written by the
library's own writer, so the reader under test sees what `evoskill demos` writes."""

from __future__ import annotations

from pathlib import Path

from evoskill.common.v1 import common_pb2
from evoskill.events.v1 import events_pb2
from evoskill.library.jsonl import write_jsonl


def library_episode(episode_id: str, won: bool, steps: list[tuple[str, list[str]]]) -> events_pb2.EpisodeCompleted:
    """A library episode of (action taken, the actions listed) steps."""
    return events_pb2.EpisodeCompleted(
        episode_id=episode_id, env_spec="twx:coin", fold="train", agent="demo", won=won,
        steps=[events_pb2.EpisodeStep(index=i, action=common_pb2.Action(text=action),
                                      target=events_pb2.SearchTarget(actions=listed))
               for i, (action, listed) in enumerate(steps)])


def write_library(path: Path, episodes: list[events_pb2.EpisodeCompleted]) -> Path:
    with path.open("w") as out:
        write_jsonl(episodes, out)
    return path
