"""What each part of a stack holds of one run, read from its own stores: the learner's replay (sqlite), every
message of the JetStream stream (one by one), and the memory's Qdrant folder (once the memory service, its one
owner, has stopped). The fault test and `evoskill bench pipeline --load` reconcile these counts: nothing lost,
nothing doubled. A run is the set of episode ids that start with its prefix."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import nats
from qdrant_client import QdrantClient

from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import Subjects, connect_options
from evoskill.platform.config import Settings
from evoskill.stack.supervisor import Stack


def replay_ids(settings: Settings, prefix: str) -> list[str]:
    """Episode ids of the run in the learner's replay (online and offline)."""
    path = settings.state_dir / "learner" / "replay.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT episode_id FROM episodes WHERE episode_id LIKE ?",
                                             (f"{prefix}%",))]


@dataclass
class StreamCounts:
    steps: Counter[tuple[str, int]] = field(default_factory=Counter)  # step.executed per key
    scored: Counter[tuple[str, int]] = field(default_factory=Counter)  # reward.scored per key
    completed: dict[str, list[int]] = field(default_factory=dict)  # episode id -> steps of each completion
    dead_letters: int = 0  # of the whole stream


async def _connect(stack: Stack) -> Any:
    return await nats.connect(stack.settings.nats_url, connect_timeout=2, max_reconnect_attempts=0,
                              **connect_options(stack.nats_settings("learner")))


async def read_stream(stack: Stack, prefix: str) -> StreamCounts:
    """Every message of the run on the stream, read one by one (as the learner's user: JetStream's API)."""
    s = stack.settings
    counts = StreamCounts()
    subject = f"{s.nats.subject_prefix}.{{}}".format
    nc = await _connect(stack)
    try:
        js = nc.jetstream()
        info = await js.stream_info(s.nats.stream)
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await js.get_msg(s.nats.stream, seq)
            name, data = msg.subject, msg.data or b""
            if name.startswith(subject(Subjects.DLQ) + "."):
                counts.dead_letters += 1
            elif name == subject(Subjects.STEP_EXECUTED):
                t = events_pb2.StepExecuted.FromString(data).transition
                if t.episode_id.startswith(prefix):
                    counts.steps[(t.episode_id, t.step_index)] += 1
            elif name == subject(Subjects.REWARD_SCORED):
                t = events_pb2.RewardScored.FromString(data).transition
                if t.episode_id.startswith(prefix):
                    counts.scored[(t.episode_id, t.step_index)] += 1
            elif name == subject(Subjects.EPISODE_COMPLETED):
                e = events_pb2.EpisodeCompleted.FromString(data)
                if e.episode_id.startswith(prefix):
                    counts.completed.setdefault(e.episode_id, []).append(len(e.steps))
    finally:
        await nc.close()
    return counts


async def drained(stack: Stack, within_s: float = 120.0) -> bool:
    """Whether every durable consumer of the stream has taken and acknowledged everything (polled until
    `within_s`): the services have processed what was published."""
    nc = await _connect(stack)
    try:
        js = nc.jetstream()
        deadline = asyncio.get_running_loop().time() + within_s
        while True:
            consumers = await js.consumers_info(stack.settings.nats.stream)
            if all(c.num_pending == 0 and c.num_ack_pending == 0 for c in consumers):
                return True
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.5)
    finally:
        await nc.close()


def stop_for_good(stack: Stack, name: str) -> None:
    """Stop one supervised service and keep it down (the memory's Qdrant folder is then free to read)."""
    component = next(c for c in stack.components if c.name == name)
    assert component.process is not None, f"{name} is not running"
    component.restarts.gave_up = True  # the supervisor leaves it down
    component.process.send_signal(signal.SIGTERM)
    component.process.wait(timeout=30)


def stored_experiences(settings: Settings, prefix: str) -> list[dict[str, Any]]:
    """The run's experiences in Qdrant's local store (read once the memory service has stopped)."""
    client = QdrantClient(path=str(settings.qdrant_path))
    try:
        points, offset = [], None
        while True:
            page, offset = client.scroll(settings.qdrant.collection, limit=1000, offset=offset, with_payload=True)
            points += [p.payload or {} for p in page]
            if offset is None:
                break
    finally:
        client.close()
    return [p for p in points if str(p.get("episode_id", "")).startswith(prefix)]
