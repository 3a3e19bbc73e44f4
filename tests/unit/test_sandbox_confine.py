"""An environment worker runs in a folder of its own with no new privileges, no capabilities, bounded processes,
CPU time and files, no core dumps and no service secrets; what the host does not allow it reports."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evoskill.sandbox.confine import Policy, is_secret
from evoskill.sandbox.worker import Worker, WorkerError, _tree


def _limits(pid: int) -> dict[str, str]:
    rows = Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]
    return {row[:26].strip(): row[26:47].strip() for row in rows}


def test_a_worker_gives_up_privileges_in_a_folder_of_its_own() -> None:
    policy = Policy(run_as="", cpu_s=1234, max_open_files=512, max_file_mb=64)
    worker = Worker(memory_mb=0, policy=policy)
    try:
        with pytest.raises(WorkerError, match="no environment is open"):  # a bug in the worker, not bad input
            worker._call_blocking(30, ("valid_actions",))  # a round trip: the worker has confined itself
        status = Path(f"/proc/{worker.pid}/status").read_text()
        assert "NoNewPrivs:\t1" in status and "CapEff:\t0000000000000000" in status
        limits = _limits(worker.pid)
        assert limits["Max core file size"] == "0" and limits["Max cpu time"] == "1234"
        assert limits["Max open files"] == "512" and limits["Max file size"] == str(64 << 20)
        assert os.readlink(f"/proc/{worker.pid}/cwd") == worker.folder
        got = worker.confinement
        assert got is not None
        # Each isolation is there, or the worker says why not.
        assert got.network_isolated or any("network" in n for n in got.notes)
        assert got.private_files or any("files" in n for n in got.notes)
        assert got.processes or any("not bounded" in n for n in got.notes)
        if got.network_isolated:
            assert os.readlink(f"/proc/{worker.pid}/ns/net") != os.readlink("/proc/self/ns/net")
    finally:
        worker.close()
    assert not os.path.exists(worker.folder)


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a Java runtime")
def test_a_workers_jvm_heap_is_capped_under_its_memory_cap(tmp_path: Path) -> None:
    # A JVM's default heap (a quarter of the machine's memory) outgrew the 2 GiB memory watch (envs/jvm.py).
    worker = Worker(memory_mb=900, policy=Policy(run_as=""))
    try:
        asyncio.run(worker.call(120, "open", "twx:coin", 0, "test", "e", (0.0, 0.0), False, False, str(tmp_path)))
        group = [int(p) for p in os.listdir("/proc") if p.isdigit() and _in_group(int(p), worker.pid)]
        options = [Path(f"/proc/{p}/environ").read_bytes().split(b"\0") for p in group
                   if b"java" in Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0]]
        assert options and all(b"JAVA_TOOL_OPTIONS=-Xmx300m -XX:+UseSerialGC" in env for env in options)
        assert _tree(worker.pid)[0] < 900
    finally:
        worker.close()


def _in_group(pid: int, group: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat[stat.rindex(")") + 2:].split()[2]) == group


def test_what_a_confined_process_starts_sees_no_secrets(tmp_path: Path) -> None:
    # The JVM, tw-make and user tools are the worker's children: they inherit the scrubbed environment.
    code = ("import sys; from evoskill.sandbox.confine import Policy, confine; confine(Policy(run_as=''), sys.argv[1]);"
            " import subprocess; print(subprocess.run(['env'], capture_output=True, text=True, check=True).stdout)")
    env = {**os.environ, "EVOSKILL_QDRANT__API_KEY": "s3cret", "OPENAI_API_KEY": "s3cret", "KEEP_ME": "1"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert "s3cret" not in out and "KEEP_ME=1" in out and f"TMPDIR={tmp_path}" in out


def test_secrets_are_recognised_by_name() -> None:
    assert is_secret("EVOSKILL_CONFIG_FILE") and is_secret("OPENAI_API_KEY") and is_secret("GITHUB_TOKEN")
    assert not is_secret("PATH") and not is_secret("JAVA_HOME")
