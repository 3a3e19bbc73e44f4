"""An environment worker runs with no new privileges, no core dumps, bounded files and no service secrets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evoskill.sandbox.confine import MAX_OPEN_FILES, is_secret
from evoskill.sandbox.worker import Worker, WorkerError


def _limits(pid: int) -> dict[str, str]:
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    return {row[:26].strip(): row[26:47].strip() for row in rows}


def test_a_worker_gives_up_privileges() -> None:
    worker = Worker(memory_mb=0)
    try:
        with pytest.raises(WorkerError, match="no environment is open"):  # a bug in the worker, not bad input
            worker._call_blocking(30, ("valid_actions",))  # a round trip: the worker has confined itself
        assert "NoNewPrivs:\t1" in Path(f"/proc/{worker.pid}/status").read_text()
        limits = _limits(worker.pid)
        assert limits["Max core file size"] == "0"
        assert int(limits["Max open files"]) <= MAX_OPEN_FILES
    finally:
        worker.close()


def test_what_a_confined_process_starts_sees_no_secrets() -> None:
    # The JVM, tw-make and user tools are the worker's children: they inherit the scrubbed environment.
    code = ("from evoskill.sandbox.confine import confine; confine(); import subprocess; "
            "print(subprocess.run(['env'], capture_output=True, text=True, check=True).stdout)")
    env = {**os.environ, "EVOSKILL_QDRANT__API_KEY": "s3cret", "OPENAI_API_KEY": "s3cret", "KEEP_ME": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "s3cret" not in out and "KEEP_ME=1" in out


def test_secrets_are_recognised_by_name() -> None:
    assert is_secret("EVOSKILL_CONFIG_FILE") and is_secret("OPENAI_API_KEY") and is_secret("GITHUB_TOKEN")
    assert not is_secret("PATH") and not is_secret("JAVA_HOME")
