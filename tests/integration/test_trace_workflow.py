"""An episode played by the TrainingWorkflow is one trace, from the client that starts the workflow down
to the consumers of the episode's events: real Temporal, nats-server and services over gRPC."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from evoskill.events.v1 import events_pb2
from evoskill.orchestrator.training.logic import TrainingInput, TrainingParams, TrainingResult
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import Settings
from evoskill.platform.service import start_service
from evoskill.platform.temporal import connect
from tests.integration.test_bus import isolated

pytestmark = pytest.mark.integration

Span = Any  # opentelemetry.sdk.trace.ReadableSpan
Match = Callable[[Span], bool]

# The services the episode touches; the learner consumes `episode.completed`, memory `reward.scored`.
SERVICES = ("sandbox", "reward", "memory", "planner", "learner", "orchestrator")


def named(name: str) -> Match:
    return lambda span: span.name == name


def consumer_of(subject: str) -> Match:
    return lambda span: span.kind.name == "CONSUMER" and subject in span.name


def grpc_server(method: str) -> Match:
    return lambda span: span.kind.name == "SERVER" and span.name.endswith(f"/{method}")


# From the start of the workflow down to the planner's episode span, in ancestor order. temporalio makes
# RunWorkflow and the workflow's StartActivity both children of StartWorkflow (the workflow's context is
# the one its starter sent), so RunWorkflow is checked beside the path, not on it.
WORKFLOW_TO_EPISODE: tuple[Match, ...] = (
    named("StartWorkflow:TrainingWorkflow"), named("StartActivity:training.play_episode"),
    named("RunActivity:training.play_episode"), grpc_server("PlayEpisode"),
)
# Below it, each consumer's own path: each list goes from an ancestor down to the consumer span.
EPISODE_TO_CONSUMERS: dict[str, tuple[Match, ...]] = {
    "reward scores each step": (named("planner.episode"), named("sandbox.step"), consumer_of("step.executed")),
    "learner stores the episode": (consumer_of("episode.completed"),),
    "memory stores each scored step": (named("planner.episode"), named("sandbox.step"), consumer_of("step.executed"),
                                       consumer_of("reward.scored")),
}


def ancestors(span: Span, by_id: dict[int, Span]) -> list[Span]:
    """The span and its ancestors up to the root, leaf first; fails on a broken link."""
    chain = [span]
    while chain[-1].parent is not None:
        parent_id = chain[-1].parent.span_id
        assert parent_id in by_id, f"{chain[-1].name}: parent span {parent_id:016x} was never recorded"
        chain.append(by_id[parent_id])
    return chain


def follows(chain: Sequence[Span], path: Sequence[Match]) -> bool:
    """`path` (root first) is a subsequence of the ancestry `chain` (leaf first)."""
    remaining = list(path)
    for span in reversed(chain):
        if remaining and remaining[0](span):
            remaining.pop(0)
    return not remaining


def stored_episode(settings: Settings, episode_id: str) -> events_pb2.EpisodeCompleted:
    with contextlib.closing(sqlite3.connect(settings.state_dir / "learner" / "replay.sqlite")) as db:
        (payload,) = db.execute("SELECT payload FROM episodes WHERE episode_id = ?", (episode_id,)).fetchone()
    return events_pb2.EpisodeCompleted.FromString(payload)


@pytest.fixture
async def stack(settings: Settings):  # type: ignore[no-untyped-def]
    settings = isolated(settings)
    settings = settings.model_copy(update={
        "temporal": settings.temporal.model_copy(update={"task_queue": f"trace-{uuid.uuid4().hex[:8]}"}),
        "state_dir": settings.state_dir / "trace",
        "memory": settings.memory.model_copy(update={"featurizer": "hash"}),  # no model start-up
        # Memory guides the search: each step's retrieval (on a thread of its own) must stay in the trace.
        "search": settings.search.model_copy(update={"memory_weight": 1.0}),
    })
    running = []
    try:
        for name in SERVICES:
            running.append(await start_service(name, settings))
        yield settings
    finally:
        for service in reversed(running):
            await service.stop()


async def test_workflow_episode_and_its_consumers_are_one_trace(stack: Settings, spans) -> None:  # type: ignore[no-untyped-def]
    settings = stack
    spans.clear()
    client = await connect(settings)  # with the TracingInterceptor, as every evoskill client
    # One epoch of one episode, no training and no evaluation: the workflow's episode is the whole trace below.
    params = TrainingParams(envs=["twx:coin"], epochs=1, episodes_per_epoch=1, eval_episodes=0, simulations=8,
                            max_steps=4, train=False, seed=3)
    workflow_id = f"trace-{uuid.uuid4().hex[:8]}"
    trained: TrainingResult = await client.execute_workflow(
        TrainingWorkflow.run, TrainingInput(params), id=workflow_id, task_queue=settings.temporal.task_queue,
    )
    (episode_id,) = trained.episode_ids

    def finished(match: Match) -> list[Span]:
        return [s for s in spans.get_finished_spans() if match(s)]

    steps = len(finished(named("sandbox.step")))  # the episode is over: every real step's span has ended
    assert steps > 0

    # Events are consumed after the workflow returns: wait for every step's score and the episode's storage.
    for _ in range(150):
        if (len(finished(consumer_of("step.executed"))) >= steps and finished(consumer_of("episode.completed"))
                and len(finished(consumer_of("reward.scored"))) >= steps):
            break
        await asyncio.sleep(0.1)

    everything = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in everything}
    (episode,) = [s for s in everything if s.name == "planner.episode"]
    assert episode.attributes["evoskill.episode_id"] == episode_id
    assert episode.attributes["evoskill.workflow_id"] == workflow_id
    trace_id = episode.context.trace_id
    # The episode as the learner stored it names its trace and workflow (`evoskill trace`, `evoskill runs show`).
    stored = stored_episode(settings, episode_id)
    assert (stored.trace_id, stored.workflow_id) == (format(trace_id, "032x"), workflow_id)
    (root,) = finished(named("StartWorkflow:TrainingWorkflow"))
    assert root.context.trace_id == trace_id and root.parent is None
    (run,) = finished(named("RunWorkflow:TrainingWorkflow"))
    assert run.parent is not None and run.parent.span_id == root.context.span_id

    # The planner's search belongs to the episode too, and so does each step's memory retrieval.
    retrievals = finished(grpc_server("Retrieve"))
    assert len(retrievals) == steps
    for retrieval in retrievals:
        chain = ancestors(retrieval, by_id)
        assert follows(chain, (*WORKFLOW_TO_EPISODE, named("planner.episode"))), " <- ".join(s.name for s in chain)
    searches = finished(named("planner.search"))
    assert len(searches) == steps
    for search in searches:
        chain = ancestors(search, by_id)
        assert follows(chain, (*WORKFLOW_TO_EPISODE, named("planner.episode"))), " <- ".join(s.name for s in chain)

    for what, path in EPISODE_TO_CONSUMERS.items():
        leaves = finished(path[-1])
        assert leaves, f"{what}: no consumer span"
        for leaf in leaves:
            assert leaf.context.trace_id == trace_id, what
            chain = ancestors(leaf, by_id)
            assert chain[-1] is root, f"{what}: the chain does not reach the workflow's start"
            assert follows(chain, (*WORKFLOW_TO_EPISODE, *path)), \
                f"{what}: {' <- '.join(s.name for s in chain)}"
    assert len(finished(consumer_of("step.executed"))) == steps
