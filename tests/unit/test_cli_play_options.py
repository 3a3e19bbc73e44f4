"""`evoskill eval` / `solve` refuse bad input before starting anything: one line naming the flag, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from evoskill.cli import app

COIN = ["--env", "twx:coin"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--env", "twx:cokingworld"], "unknown TextWorldExpress game"),
        (["--env", "twx:cookingworld?numLocations=abc"], "numLocations"),
        ([*COIN, "--agent", "randum"], "'--agent'"),
        ([*COIN, "--fold", "validation"], "'--fold'"),
        ([*COIN, "--simulations", "0"], "'--simulations'"),
        ([*COIN, "--max-steps", "-1"], "'--max-steps'"),
        ([*COIN, "--episodes", "0"], "'--episodes'"),
        ([*COIN, "--episodes", "-3"], "'--episodes'"),
        ([*COIN, "--parallel", "0"], "'--parallel'"),
        ([*COIN, "--seed-offset", "-5"], "'--seed-offset'"),
    ],
)
def test_eval_refuses_bad_options(args: list[str], named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["eval", *args])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert not (tmp_path / "state").exists()  # nothing was started


def test_solve_refuses_bad_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["solve", *COIN, "--agent", "randum"])
    assert result.exit_code == 2 and "'--agent'" in result.output


@pytest.mark.parametrize("args", [["solve", *COIN], ["train", *COIN], ["explore", "--candidate", "v000001", *COIN],
                                  ["library", "train", "--steps", "1"]])
def test_a_negative_seed_is_refused_before_starting_anything(
        args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    code, line = through_main([*args, "--seed", "-1"], monkeypatch, capsys)
    assert code == 2, line
    assert line.startswith("error: Invalid value for '--seed': Input should be greater than or equal to 0"), line
    assert not (tmp_path / "state").exists()


def test_eval_json_folder_that_cannot_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(app, ["eval", *COIN, "--json", str(blocker / "sub" / "r.json")])
    assert result.exit_code == 2 and "--json" in result.output


def test_health_of_an_unknown_service_is_one_line() -> None:
    result = CliRunner().invoke(app, ["health", "foo"])
    assert result.exit_code == 2 and "'foo' is not one of" in result.output


def test_eval_exits_1_saying_how_many_episodes_failed_and_keeps_them_in_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner stands in here: seed 1's episode fails in the services, the others are played."""
    import contextlib
    import json

    import grpc

    from evoskill.clients import episodes
    from evoskill.planner import client

    @contextlib.asynccontextmanager
    async def running(settings, say):  # type: ignore[no-untyped-def]
        yield settings

    async def play(settings, request):  # type: ignore[no-untyped-def]
        if request.seed == 1:
            raise grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       details="the sandbox's worker died")
        return client.EpisodeOutcome(request.seed, True, 1.0, 3, 3, 1.0, episode_id=request.episode_id,
                                     trace_id="ab" * 16)

    monkeypatch.setattr(episodes, "services", running)
    monkeypatch.setattr(client, "play", play)
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["eval", *COIN, "--episodes", "3", "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 1, result.output
    assert "1 of 3 episode(s) failed in the services" in result.output and "Traceback" not in result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["errors"] == 1 and report["success_rate"] == 2 / 3
    failed = report["episodes"][1]
    assert failed["error"] == "INTERNAL: the sandbox's worker died" and failed["episode_id"].endswith("-1")


def test_a_usage_mistake_is_one_line_and_exit_2_through_the_real_command() -> None:
    """click's own errors (an unknown option, a value of the wrong type, a declared range) as one line naming the
    flag and where to look, not click's box or a traceback."""
    import subprocess
    import sys

    for args, named in ((["eval", "--env", "twx:coin", "--episodes", "abc"], "'--episodes'"),
                        (["eval", "--bogus"], "--bogus"),
                        (["eval", "--env", "twx:coin", "--agent", "randum"], "'--agent'"),
                        (["bench", "pipeline", "--load", "--concurrency", "0"], "'--concurrency'")):
        proc = subprocess.run([sys.executable, "-m", "evoskill", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], proc.stderr
        assert "--help`" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [["train"], ["explore", "--candidate", "v000001"],
                                     ["demos", "--episodes", "1", "--out", "x.jsonl"]])
def test_every_command_with_env_refuses_a_bad_spec_before_starting_anything(
        command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, [*command, "--env", "twx:cokingworld"])
    assert result.exit_code == 2, result.output
    assert "--env 'twx:cokingworld': unknown TextWorldExpress game" in result.output
    assert not (tmp_path / "state").exists()  # no stack was started for it


@pytest.mark.parametrize(("args", "line"), [
    (["train", *COIN, "--train-steps", "0"], "error: --train-steps must be >= 1 when training (got 0)"),
    (["train", *COIN, "--tune", "es", "--es-population", "3"], "error: --es-population must be even"),
    (["train", *COIN, "--episodes-per-epoch", "5000"], "error: --episodes-per-epoch (5000) exceeds"),
    (["explore", "--candidate", "v000001", *COIN, "--canary-fraction", "1"], "error: --canary-fraction must be in"),
])
def test_a_run_parameter_problem_names_the_flag_not_the_field(
        args: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.output.startswith(line), result.output
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("args", [["eval", *COIN, "--json"], ["demos", *COIN, "--episodes", "1", "--out"],
                                  ["demos", *COIN, "--episodes", "1", "--json"], ["trace", "abc", "--out"],
                                  ["export", "--format", "sft", "--json"], ["library", "export", "--out"],
                                  ["library", "train", "--steps", "1", "--json"]])
def test_an_output_file_whose_folder_cannot_be_made_is_refused_before_any_work(
        args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, line = through_main([*args, str(blocker / "sub" / "out.json")], monkeypatch, capsys)
    assert code == 2 and line.startswith(f"error: Invalid value for '{args[-1]}': cannot create its folder "
                                         f"{blocker / 'sub'}"), line
    assert not (tmp_path / "state").exists()


def through_main(args: list[str], monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The console entry point's exit status and its one line on stderr."""
    import sys

    from evoskill.cli import main

    monkeypatch.setattr(sys, "argv", ["evoskill", *args])
    with pytest.raises(SystemExit) as stopped:
        main()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return int(stopped.value.code or 0), lines[0]


def test_an_output_files_missing_folders_are_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["trace", "abc", "--out", str(tmp_path / "new" / "sub" / "t.json")])
    assert result.exit_code == 1 and "no span files" in result.output  # what follows still says what is missing
    assert (tmp_path / "new" / "sub").is_dir()


def test_sigterm_unwinds_a_client_command_as_ctrl_c_does() -> None:
    """A job's timeout or `kill` ends a command that started an embedded stack: its `finally` (the stack's stop)
    runs, the command ends as interrupted, and SIGTERM is Python's own again afterwards."""
    import asyncio
    import os
    import signal

    from evoskill.cli_support import run_client

    unwound = []

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.1, os.kill, os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(5)
        finally:
            unwound.append("stack stopped")

    def elsewhere(signum: int, frame: object) -> None:  # not the command's: a regression fails, pytest lives
        unwound.append("SIGTERM reached the handler outside")

    before = signal.signal(signal.SIGTERM, elsewhere)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_client(main)
        assert unwound == ["stack stopped"] and signal.getsignal(signal.SIGTERM) == elsewhere
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_unpublished_policy_is_one_line_before_any_episode_is_played(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The learner stands in here: it has published v000000 and v000001."""
    import contextlib

    from evoskill.clients import episodes
    from evoskill.planner import client

    played: list[int] = []

    @contextlib.asynccontextmanager
    async def running(settings, say):  # type: ignore[no-untyped-def]
        yield settings

    async def play(settings, request):  # type: ignore[no-untyped-def]
        played.append(request.seed)

    async def published(settings):  # type: ignore[no-untyped-def]
        return ["v000000", "v000001"]

    monkeypatch.setattr(episodes, "services", running)
    monkeypatch.setattr(client, "play", play)
    monkeypatch.setattr(episodes, "published_policies", published)
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    for command in ("eval", "solve"):
        code, line = through_main([command, *COIN, "--agent", "policy", "--policy", "v000009"], monkeypatch, capsys)
        assert (code, line) == (2, "error: --policy 'v000009' is not published; the learner has v000000, v000001")
    code, line = through_main(["eval", *COIN, "--agent", "mcts", "--policy", "v000001"], monkeypatch, capsys)
    assert (code, line) == (2, "error: --policy v000001: --agent mcts plays no policy (policy and policy+mcts do)")
    assert played == []


def test_trains_switches_reach_the_workflows_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evoskill import runs_cli

    started: list[object] = []
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(runs_cli, "detach", lambda settings, params, workflow_id: started.append(params))
    result = CliRunner().invoke(app, ["train", *COIN, "--detach", "--memory", "on", "--entropy-trigger", "0.3",
                                      "--curiosity", "0.2", "--novelty", "0.5"])
    assert result.exit_code == 0, result.output
    (params,) = started
    assert (params.memory_weight, params.entropy_trigger) == (1.0, 0.3)  # type: ignore[attr-defined]
    assert (params.curiosity_weight, params.novelty_weight) == (0.2, 0.5)  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, ["train", *COIN, "--detach", "--memory", "off"])
    assert started[-1].memory_weight == 0.0 and started[-1].entropy_trigger is None  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, ["train", *COIN, "--entropy-trigger", "1.5"])
    assert result.exit_code == 2 and "'--entropy-trigger'" in result.output
    result = CliRunner().invoke(app, ["train", *COIN, "--detach", "--fold-size", "5", "--episodes-per-epoch", "5"])
    assert result.exit_code == 0 and started[-1].fold_size == 5  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, ["train", *COIN, "--fold-size", "5", "--episodes-per-epoch", "8"])
    assert result.exit_code == 2 and "--episodes-per-epoch (8) exceeds --fold-size (5)" in result.output
