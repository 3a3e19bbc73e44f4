"""The offline library against real services: a generated gold path is the episode the planner records when it
plays the demo agent (over gRPC, events on a real nats-server), and ImportEpisodes / ExportEpisodes store and
return the library durably in the real learner."""

from __future__ import annotations

import grpc
import pytest

from evoskill.core.learn.data import episode_examples
from evoskill.events.v1 import events_pb2
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.library.cli import send_to_learner
from evoskill.library.generate import generate
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import LearnerSettings, Settings
from evoskill.platform.rpc import channel
from evoskill.platform.service import start_service
from tests.integration.test_bus import isolated
from tests.integration.test_learner_service import Watcher
from tests.integration.waiting import rpc_error, until
from tests.unit.test_library import COOKING, same_view

pytestmark = pytest.mark.integration


async def test_a_generated_gold_path_is_what_the_planner_records(services: Settings) -> None:
    settings = services
    watcher = Watcher(settings)
    await watcher.bus.start()
    try:
        async with channel(settings.endpoint("planner").target) as ch:
            request = planner_pb2.PlayEpisodeRequest(env_spec=COOKING, seed=5, fold="train", max_steps=100,
                                                     config=planner_pb2.SearchConfig(agent="demo"))
            _ = [u async for u in planner_pb2_grpc.PlannerServiceStub(ch).PlayEpisode(request, timeout=300)]
        await until(lambda: bool(watcher.episodes), "the demo episode's EpisodeCompleted")
    finally:
        await watcher.bus.stop()
    (played,) = watcher.episodes.values()
    (generated,) = generate(COOKING, "train", range(5, 6), settings=settings)
    assert played.won and generated.won and len(played.steps) == len(generated.steps)
    assert [s.reward for s in played.steps] == [s.reward for s in generated.steps]  # the reward service's scoring
    for a, b in zip(played.steps, generated.steps, strict=True):
        assert a.target == b.target  # candidates, templates and seen marks
        assert a.transition.before == b.transition.before and a.transition.after == b.transition.after
    pairs = zip(episode_examples(played), episode_examples(generated), strict=True)
    assert all(same_view(x, y) for x, y in pairs)


async def test_the_library_is_imported_trained_on_exported_and_kept_over_a_restart(settings: Settings) -> None:
    settings = isolated(settings).model_copy(update={"learner": LearnerSettings(hidden=32, feature_dim=64,
                                                                                batch_size=8)})
    library = list(generate(COOKING, "train", range(3), seen=False))
    learner = await start_service("learner", settings)
    try:
        reply = await send_to_learner(settings, library)
        assert (reply.received, reply.stored, reply.duplicates) == (3, 3, 0)
        assert reply.library_episodes == 3 and reply.library_steps == sum(len(e.steps) for e in library)
        again = await send_to_learner(settings, [library[1]])  # an import run twice stores nothing new
        assert (again.stored, again.duplicates, again.library_episodes) == (0, 1, 3)

        test_game = events_pb2.EpisodeCompleted()
        test_game.CopyFrom(library[0])
        test_game.episode_id, test_game.fold = "logged-test-game", "test"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await send_to_learner(settings, [library[2], test_game])
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "episode 1 (logged-test-game) is from the 'test' fold" in (err.value.details() or "")

        async with channel(settings.endpoint("learner").target) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            trained = await stub.Train(learner_pb2.TrainRequest(steps=3, online_fraction=0.0))
            assert trained.policy_version == "v000001" and trained.replay_episodes == 3
            exported = [e async for e in stub.ExportEpisodes(learner_pb2.ExportEpisodesRequest())]
        assert exported == library
    finally:
        await learner.stop()

    learner = await start_service("learner", settings)  # same state folder: the library is on disk
    try:
        async with channel(settings.endpoint("learner").target) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            assert [e.episode_id async for e in stub.ExportEpisodes(learner_pb2.ExportEpisodesRequest())] == \
                [e.episode_id for e in library]
            err = await rpc_error(stub.ImportEpisodes(iter([learner_pb2.ImportEpisodesRequest()])))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "episode 0: episode_id is empty" in (
                err.details() or "")
    finally:
        await learner.stop()
