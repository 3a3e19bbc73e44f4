"""TrainingWorkflow on a real Temporal dev server and nats-server, with the real services in-process.

Episodes are tiny (twx:coin, 4 steps, 4 simulations) so that the behaviour under test — counting each
episode once, continue-as-new, a worker restart mid-episode, the ES generation — costs seconds. The
workflow's branches (signals, demonstrations, ES, retries) are also tested against test doubles of its
activities on the time-skipping server: tests/orchestrator/test_training_workflow.py.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus

from evoskill.clients.jobs import check_stack
from evoskill.clients.training import run_training
from evoskill.library.generate import episode_id as demo_id
from evoskill.orchestrator.training.logic import TrainingInput, demo_tasks, episode_id
from evoskill.orchestrator.training.starter import start_training
from evoskill.orchestrator.training.workflow import TrainingWorkflow
from evoskill.platform.config import SERVICES, without_secrets
from tests.integration.training_stack import Handle, Stack, client_of, expected_ids, tiny, wait_for

pytestmark = pytest.mark.integration


def tensorboard_files(folder: Path) -> list[Path]:
    return list(folder.glob("events.out.tfevents.*"))


async def test_two_epochs_train_evaluate_record_and_continue_as_new(stack: Stack) -> None:
    settings = stack.settings
    params = tiny(epochs=2, continue_as_new_every=1)
    client = await client_of(settings)
    workflow_id = f"train-{uuid.uuid4().hex[:8]}"
    first_run = await client.start_workflow(TrainingWorkflow.run, TrainingInput(params), id=workflow_id,
                                            task_queue=settings.temporal.task_queue)
    handle: Handle = client.get_workflow_handle_for(TrainingWorkflow.run, workflow_id)

    early = await wait_for(handle, lambda p: p.episodes_played >= 1, what="one episode")
    assert early.epochs == 2 and early.epoch_episodes_total == 2 and early.mean_reward is not None
    result = await handle.result()

    # Each train episode counted once, under the id derived from the workflow, epoch and slot.
    assert result.epochs_completed == 2 and result.episodes_played == 4
    assert sorted(result.episode_ids) == sorted(expected_ids(workflow_id, params))
    assert result.eval_episodes == 2
    # The learner trained on them: a policy came out of the first epoch and guided the second.
    first_epoch, second_epoch = result.history
    assert first_epoch.agent == "mcts" and first_epoch.policy_version
    assert second_epoch.agent == "policy+mcts" and second_epoch.policy_version != first_epoch.policy_version
    assert second_epoch.losses and all(v == v for v in second_epoch.losses.values())  # no NaN
    assert result.policy_version == second_epoch.policy_version
    # Each epoch's Train carried its idempotency key, recorded with the version it made.
    assert stack.learner is not None
    trainer = stack.learner.trainer
    made = {e.request_id: e.version for e in trainer.registry.list() if e.request_id.startswith(workflow_id)}
    assert made == {f"{workflow_id}-e0-train": first_epoch.policy_version,
                    f"{workflow_id}-e1-train": second_epoch.policy_version}
    # The evaluation episodes (dev fold) reached the learner and were kept out of replay; training ones are in.
    evaluated = [episode_id(workflow_id, epoch, "v", 0) for epoch in range(2)]
    assert all(trainer.skipped.get(e) == "dev" and not trainer.has(e) for e in evaluated)
    assert all(trainer.has(e) for e in result.episode_ids)

    # continue_as_new_every=1: the first run handed its state over to a second run, which finished.
    first_run_id = first_run.first_execution_run_id
    handed_over = await client.get_workflow_handle(workflow_id, run_id=first_run_id).describe()
    assert handed_over.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
    latest = await handle.describe()
    assert latest.run_id != first_run_id
    assert latest.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_COMPLETED
    progress = await handle.query(TrainingWorkflow.progress)
    assert progress.phase == "done" and progress.episodes_played == 4 and len(progress.history) == 2

    # The epoch records: one JSONL line per epoch and TensorBoard events, under state_dir/train/<id>.
    folder = Path(settings.state_dir) / "train" / workflow_id
    lines = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [0, 1]
    assert tensorboard_files(folder)


async def test_the_main_jobs_stages_start_imitation_then_search(stack: Stack, tmp_path: Path) -> None:
    """What `evoskill run` runs (SHORT_TRAINING's shape at a smaller budget), through the CLI's client: the
    starting agent on the held-out games, gold paths into the offline library and θ cloned on them, a search
    epoch from that θ; the table, curves and JSON say so in one epoch numbering."""
    params = tiny(evaluate_start=True, demos=2, imitation_steps=3, eval_episodes=2, eval_agent="policy",
                  online_fraction=0.5)  # max_steps 4 binds the played games only
    workflow_id = f"main-{uuid.uuid4().hex[:8]}"
    out = io.StringIO()
    result = await run_training(stack.settings, params, Console(file=out, width=200), tmp_path, workflow_id)

    start, imitation, search = result.history
    assert [(m.epoch, m.stage) for m in result.history] == [(0, "start"), (1, "imitation"), (2, "search")]
    assert [(m.eval_agent, m.eval_episodes) for m in result.history] == [("random", 2), ("policy", 2),
                                                                         ("policy", 2)]
    assert all(0.0 <= m.eval_success <= 1.0 for m in result.history)
    assert not start.policy_version and imitation.policy_version and search.policy_version
    assert search.policy_version != imitation.policy_version and search.agent == "policy+mcts"
    # The gold paths are in the offline library, each played to its win however short max_steps is.
    assert stack.learner is not None
    replay = stack.learner.trainer.replay
    demos = [demo_id("twx:coin", "train", t.seed) for t in demo_tasks(params.envs, params.seed, 2, params.fold_size)]
    assert all(d in replay.offline and d not in replay.online for d in demos)
    assert all(replay.offline.examples(d)[0].skills for d in demos)  # skills are recorded for wins only
    assert max(len(replay.offline.examples(d)) for d in demos) > params.max_steps
    assert imitation.library_episodes >= 2 and imitation.losses and "cloned on 2 gold paths" in imitation.note
    # Only the search epoch's games are training episodes; they reached replay as online experience.
    assert sorted(result.episode_ids) == [episode_id(workflow_id, 2, "t", i) for i in range(2)]
    assert all(e in replay.online for e in result.episode_ids)

    report = json.loads((tmp_path / "report.json").read_text())
    assert [h["stage"] for h in report["history"]] == ["start", "imitation", "search"]
    assert report["params"]["demos"] == 2 and report["wall_time_s"] > 0
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    text = out.getvalue()
    assert "epoch 0 = the start, before any training" in text and "cloned on 2 gold paths" in text
    assert "held-out success: " in text and "(0 start, random) → " in text


async def test_worker_restart_mid_episode_counts_every_episode_once(stack: Stack) -> None:
    params = tiny(episodes_per_epoch=3, eval_episodes=0, parallelism=1, max_steps=6, heartbeat_timeout_s=10.0)
    client = await client_of(stack.settings)
    workflow_id = f"train-{uuid.uuid4().hex[:8]}"
    handle = await start_training(client, stack.settings, params, workflow_id)

    # One episode done, the next one running: take the worker away, then bring a new one.
    await wait_for(handle, lambda p: p.episodes_played == 1 and p.in_flight == 1, what="the second episode")
    await stack.stop_worker()
    await stack.start_worker()
    result = await handle.result()

    assert result.episodes_played == 3
    assert sorted(result.episode_ids) == sorted(expected_ids(workflow_id, params))
    # The interrupted episode ran again, under the same id, on the new worker.
    history = [e async for e in handle.fetch_history_events()]
    retried = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
               and e.activity_task_started_event_attributes.attempt > 1]
    assert retried, "no activity was retried: the worker did not stop mid-episode"
    # The planner published each episode that completed; the interrupted attempt published nothing.
    for _ in range(50):
        if set(result.episode_ids) <= set(stack.completed):
            break
        await asyncio.sleep(0.1)
    ours = [e for e in stack.completed if e.startswith(workflow_id)]
    assert sorted(set(ours)) == sorted(result.episode_ids) and len(ours) == 3


async def test_es_run_through_the_cli_client_reports_curves_and_the_best_config(stack: Stack, tmp_path: Path) -> None:
    """The path `evoskill train --tune es` takes: start, follow the query live, write the report."""
    params = tiny(tune="es", es_population=2, episodes_per_epoch=1, eval_episodes=1, train=False)
    workflow_id = f"train-{uuid.uuid4().hex[:8]}"
    out = io.StringIO()
    result = await run_training(stack.settings, params, Console(file=out, width=160), tmp_path, workflow_id)

    (generation,) = result.history
    assert len(generation.es_fitness) == 2 and result.episodes_played == 2
    # Both candidates played the same task (common random numbers), each under its own id.
    assert sorted(result.episode_ids) == [episode_id(workflow_id, 0, f"c{c:02d}t", 0) for c in (0, 1)]
    assert set(generation.search) == {"c_puct", "dirichlet_alpha", "dirichlet_weight", "rollout_depth"}
    assert result.es_best and result.es_best_fitness == max(generation.es_fitness)

    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "report.json").read_text())["workflow_id"] == workflow_id
    assert tensorboard_files(tmp_path)
    text = out.getvalue()
    assert f"training {workflow_id}" in text and "ES best search configuration: c_puct=" in text


async def test_the_main_jobs_health_check_is_traced_from_its_client(stack: Stack, spans) -> None:  # type: ignore[no-untyped-def]
    """`evoskill run` starts its workflows through the project's client: the start is in the trace."""
    spans.clear()
    await check_stack(stack.settings, Console(file=io.StringIO()))
    started = [s for s in spans.get_finished_spans() if s.name == "StartWorkflow:StackHealthWorkflow"]
    assert len(started) == 1


async def test_the_health_starter_run_as_a_script_reads_the_stacks_settings(stack: Stack, tmp_path: Path) -> None:
    """`python -m evoskill.orchestrator.health.starter` (temporalio's samples' starter) with the settings a process of
    the stack reads (EVOSKILL_CONFIG_FILE), against the stack's worker, whose activity asks where the worker's
    settings say: the services this stack runs SERVING, the memory service (not run here) DOWN, so exit 1."""
    data, secrets = without_secrets(stack.settings)
    config = tmp_path / "settings.json"
    config.write_text(json.dumps(data))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOSKILL_")} | secrets
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "evoskill.orchestrator.health.starter", env=env | {"EVOSKILL_CONFIG_FILE": str(config)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    lines = out.decode().split("\n")
    assert process.returncode == 1, out.decode()
    assert {line.split(":")[0] for line in lines if line.endswith(": SERVING")} == set(SERVICES) - {"memory"}
    assert "memory: DOWN" in lines
