"""Whether a recorded pid is a live process: what `evoskill down` and `status` read of a stack's supervisor."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from evoskill.stack.running import process_alive


def test_a_live_process_is_alive_a_zombie_or_a_reaped_one_is_not() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while process_alive(child.pid) and time.monotonic() < deadline:  # exited, not yet reaped: a zombie
        time.sleep(0.05)
    assert not process_alive(child.pid)
    child.wait()
    assert not process_alive(child.pid)
    assert not process_alive(2**22 + 1)  # above Linux's highest pid: never a process
