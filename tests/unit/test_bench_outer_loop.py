"""The outer-loop benchmark's summary: per-agent means over seeds and the issue's comparisons."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import evoskill.bench.outer_loop as outer_loop
from evoskill.bench.outer_loop import AgentRow, EvalArgs, reused_baselines, show, summary


def test_summary_compares_theta_with_the_baselines_over_seeds() -> None:
    rows = [
        AgentRow("random", 0, [0.3], [0.3]),
        AgentRow("uniform-prior MCTS", 4, [0.6], [0.6]),
        AgentRow("uniform-prior MCTS", 12, [0.75], [0.75]),
        AgentRow("θ + MCTS", 4, [0.8, 0.9, 0.7], [0.8, 0.9, 0.7]),
        AgentRow("θ alone", 0, [0.5, 0.6, 0.4], [0.5, 0.6, 0.4]),
    ]
    curves = {0: [1.0, 2.0], 1: [2.0, 1.5], 2: [0.5, 0.9]}
    result = summary(EvalArgs("twx:coin", 20, 50, 2), [0, 1, 2], rows, curves, "--epochs 2")
    c = result["comparisons"]
    assert c["theta_search_minus_uniform_same_sims"] == pytest.approx(0.2)
    assert c["theta_search_minus_uniform_more_sims"] == pytest.approx(0.05)
    assert c["theta_alone_minus_random"] == pytest.approx(0.2)
    assert c["curve_rises_in_seeds"] == 2
    theta = result["agents"][3]
    assert theta["success_mean"] == pytest.approx(0.8) and theta["success_sd"] == pytest.approx(0.1)
    assert result["agents"][0]["success_sd"] == 0.0  # one baseline run: no spread
    console = Console(record=True, width=160)
    show(console, result)
    text = console.export_text()
    assert "80% ± 10%" in text and "in 2 of 3 seeds" in text


def test_baselines_are_reused_only_from_a_run_of_the_same_games(tmp_path: Path) -> None:
    rows = [AgentRow("random", 0, [0.3], [0.3]), AgentRow("uniform-prior MCTS", 8, [0.0], [0.23]),
            AgentRow("uniform-prior MCTS", 24, [0.1], [0.4]), AgentRow("θ + MCTS", 8, [0.1], [0.3]),
            AgentRow("θ alone", 0, [0.0], [0.1])]
    args = EvalArgs("twx:cookingworld", 10, 30, 2)
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(summary(args, [0], rows, {0: [1.0, 2.0]}, "")))
    reused = reused_baselines(earlier, args, 8, 3)
    assert [(r.simulations, r.score) for r in reused] == [(0, [0.3]), (8, [0.23]), (24, [0.4])]
    with pytest.raises(ValueError, match="other baselines"):
        reused_baselines(earlier, EvalArgs("twx:cookingworld", 20, 30, 2), 8, 3)  # other games
    with pytest.raises(ValueError, match="other baselines"):
        reused_baselines(earlier, args, 4, 3)  # other budgets


def test_a_terminated_benchmark_runs_its_cleanup(tmp_path: Path) -> None:
    """SIGTERM inside `terminated_as_interrupt` unwinds like Ctrl-C, so a stack's `down` (a `finally`) runs."""
    import signal
    import subprocess
    import sys

    cleaned = tmp_path / "cleaned"
    code = ("import sys, time\nfrom evoskill.bench.outer_loop import terminated_as_interrupt\n"
            "with terminated_as_interrupt():\n    try:\n        print('ready', flush=True)\n        time.sleep(60)\n"
            f"    finally:\n        open({str(cleaned)!r}, 'w').write('down')\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert child.returncode != 0 and "KeyboardInterrupt" in err
    assert cleaned.read_text() == "down"


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_an_interrupted_benchmark_lets_its_subprocess_stop_as_after_ctrl_c(tmp_path: Path, sigint: str) -> None:
    """The eval a benchmark waits for gets a SIGINT (it writes the episodes played so far), not a kill; also
    where the benchmark was started with SIGINT ignored (`nohup evoskill bench … &` from a script)."""
    import os
    import signal
    import subprocess
    import sys

    kept = tmp_path / "kept"
    child_code = ("import time\nprint('ready', flush=True)\ntry:\n    time.sleep(60)\n"
                  f"except KeyboardInterrupt:\n    open({str(kept)!r}, 'w').write('partial report')\n    raise\n")
    parent_code = ("import os, sys\nfrom evoskill.bench.outer_loop import run_interruptible, terminated_as_interrupt\n"
                   "with terminated_as_interrupt():\n"
                   f"    run_interruptible([sys.executable, '-c', {child_code!r}], dict(os.environ), sys.stdout)\n")
    disposition = signal.SIG_IGN if sigint == "ignored" else signal.SIG_DFL
    parent = subprocess.Popen([sys.executable, "-c", parent_code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ),
                              preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))
    assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
    parent.send_signal(signal.SIGTERM)  # the parent only, as a job's timeout or `kill` sends it
    parent.communicate(timeout=60)
    assert parent.returncode != 0 and kept.read_text() == "partial report"


def _cli_failing_first_up(calls: list[tuple[str, int]], take_port: bool, held: list[socket.socket]) -> Any:
    """`_cli` whose first `up` fails, its NATS port taken by another process meanwhile where `take_port`."""

    def cli(*args: str, env: dict[str, str], log: Path) -> int:
        port = int(env["EVOSKILL_NATS__PORT"])
        calls.append((args[0], port))
        if args[0] == "up" and sum(c[0] == "up" for c in calls) == 1:
            if take_port:
                sock = socket.socket()
                sock.bind(("127.0.0.1", port))
                sock.listen()
                held.append(sock)
            raise RuntimeError("evoskill up failed (exit 1)")
        return 0

    return cli


@pytest.mark.parametrize("taken", [True, False])
def test_a_stack_start_that_lost_a_port_to_another_process_is_tried_again_on_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: bool) -> None:
    calls: list[tuple[str, int]] = []
    held: list[socket.socket] = []
    monkeypatch.setattr(outer_loop, "_cli", _cli_failing_first_up(calls, taken, held))
    try:
        if taken:
            env = outer_loop._up(tmp_path, {}, tmp_path / "bench.log")
            assert [c[0] for c in calls] == ["up", "down", "up"]
            assert int(env["EVOSKILL_NATS__PORT"]) != calls[0][1]
            assert "taken by another process" in (tmp_path / "bench.log").read_text()
        else:  # a start that failed for another reason is not retried
            with pytest.raises(RuntimeError, match="up failed"):
                outer_loop._up(tmp_path, {}, tmp_path / "bench.log")
            assert [c[0] for c in calls] == ["up", "down"]
    finally:
        for sock in held:
            sock.close()


def test_each_command_of_a_bench_is_logged_with_its_start_exit_and_duration(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outer_loop, "run_interruptible", lambda command, env, out: 1)
    log = tmp_path / "bench.log"
    assert outer_loop._cli("eval", "--env", "twx:coin", env={}, log=log) == 1  # an eval's lost episodes: kept
    first, last = log.read_text().splitlines()
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] \$ evoskill eval --env twx:coin", first)
    assert re.fullmatch(r"\[\d\d:\d\d:\d\d\] evoskill eval: exit 1 after \d+\.\d s", last)
