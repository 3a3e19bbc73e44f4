"""The offline library against real services: a generated gold path is the episode the planner records when it
plays the demo agent (over gRPC, events on a real nats-server), and `evoskill demos --to-learner` / `library
import|train|export` store, train on and return the library durably in the real learner (and `evoskill export`
turns it into fine-tuning rows)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import grpc
import pytest

from evoskill.core.learn.data import episode_examples
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.library.generate import generate
from evoskill.library.jsonl import to_record
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
            _ = [u async for u in planner_pb2_grpc.PlannerServiceStub(ch).PlayEpisode(request, timeout=200)]
        await until(lambda: bool(watcher.episodes), "the demo episode's EpisodeCompleted")
    finally:
        await watcher.bus.stop()
    (played,) = watcher.episodes.values()
    (generated,) = generate(COOKING, "train", range(5, 6), settings=settings)
    assert played.won and generated.won and len(played.steps) == len(generated.steps)
    assert [s.reward for s in played.steps] == [s.reward for s in generated.steps]  # the reward service's scoring
    assert played.initial == generated.initial
    for a, b in zip(played.steps, generated.steps, strict=True):
        assert a == b  # candidates, templates, seen marks, the action, what came of it
    pairs = zip(episode_examples(played), episode_examples(generated), strict=True)
    assert all(same_view(x, y) for x, y in pairs)


async def evoskill(settings: Settings, *args: str) -> tuple[int, str]:
    """The public CLI in a subprocess, reaching the test's learner (the test's event loop serves it meanwhile)."""
    env = dict(os.environ, EVOSKILL_LEARNER_ENDPOINT__PORT=str(settings.learner_endpoint.port),
               EVOSKILL_STATE_DIR=str(settings.state_dir))
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "evoskill.cli", *args, env=env,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await process.communicate()
    return process.returncode or 0, " ".join(out.decode().split())


async def test_the_library_is_imported_trained_on_exported_and_kept_over_a_restart(settings: Settings,
                                                                                     tmp_path: Path) -> None:
    settings = isolated(settings).model_copy(update={"learner": LearnerSettings(hidden=32, feature_dim=64,
                                                                                batch_size=8)})
    library, back = tmp_path / "library.jsonl", tmp_path / "exported.jsonl"
    learner = await start_service("learner", settings)
    try:
        rc, out = await evoskill(settings, "demos", "--env", COOKING, "--episodes", "3", "--workers", "1",
                                 "--no-seen", "--out", str(library), "--to-learner")
        assert rc == 0 and "learner: 3 stored, 0 already there; the offline library holds 3 episodes" in out, out
        assert "3 episodes (3 won)" in out and "episodes/s" in out
        assert "1/3 gold paths (1 won) in" in out and "3/3 gold paths (3 won)" in out  # progress, piped stdout
        rc, out = await evoskill(settings, "library", "import", str(library))  # run twice: nothing new
        assert rc == 0 and "0 stored, 3 already there" in out, out

        logged = json.loads(library.read_text().splitlines()[0])
        logged.update(episode_id="logged-test-game", fold="test")
        test_games = tmp_path / "test-games.jsonl"
        test_games.write_text(json.dumps(logged) + "\n")
        rc, out = await evoskill(settings, "library", "import", str(test_games))
        assert rc == 1 and "episode 0 (logged-test-game) is from the 'test' fold" in out, out

        rc, out = await evoskill(settings, "library", "train", "--steps", "3", "--online-fraction", "0")
        assert rc == 0 and "v000001: 3 steps on 3 episodes" in out, out
        rc, out = await evoskill(settings, "library", "export", "--out", str(back))
        assert rc == 0 and back.read_text() == library.read_text(), out
        sft = tmp_path / "sft.jsonl"  # the fine-tuning export reads the learner's replay the same way
        rc, out = await evoskill(settings, "export", "--format", "sft", "--json", str(sft))
        steps = sum(len(json.loads(line)["steps"]) for line in library.read_text().splitlines())
        assert rc == 0 and f"{steps} sft rows from 3 of 3 episodes ({steps} steps, 0 searched)" in out, out
        assert [json.loads(line)["messages"][-1]["content"] for line in sft.read_text().splitlines()] == [
            step["action"] for line in library.read_text().splitlines() for step in json.loads(line)["steps"]]
    finally:
        await learner.stop()

    learner = await start_service("learner", settings)  # same state folder: the library is on disk
    try:
        async with channel(settings.endpoint("learner").target) as ch:
            stub = learner_pb2_grpc.LearnerServiceStub(ch)
            exported = [e async for e in stub.ExportEpisodes(learner_pb2.ExportEpisodesRequest())]
            assert [to_record(e) for e in exported] == [json.loads(line) for line in library.read_text().splitlines()]
            err = await rpc_error(stub.ImportEpisodes(iter([learner_pb2.ImportEpisodesRequest()])))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "episode 0: episode_id is empty" in (
                err.details() or "")
    finally:
        await learner.stop()
