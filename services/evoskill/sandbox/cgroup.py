"""A pids cgroup per environment worker, for a sandbox that runs as root and may make one.

RLIMIT_NPROC never applies to uid 0, so a worker that stays root (no usable `sandbox.run_as` user) is bounded by
``pids.max`` of a cgroup of its own instead: ``evoskill-worker-<pid>`` below the sandbox's own cgroup, in the
cgroup v1 ``pids`` hierarchy or in cgroup v2 where the pids controller can be enabled there. The cgroup also
lists every process the worker started, even one that left its process group, so stopping a worker stops them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PREFIX = "evoskill-worker-"


def _mounts() -> dict[str, Path]:
    """Mount point of the v1 pids hierarchy ("pids") and of cgroup v2 ("")."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fstype, _, options = after.split(" ", 2)
        if fstype == "cgroup2":
            found.setdefault("", Path(before.split()[4]))
        elif fstype == "cgroup" and "pids" in options.split(" ")[-1].split(","):
            found.setdefault("pids", Path(before.split()[4]))
    return found


def base() -> Path | None:
    """The folder of this process's own pids cgroup, None where there is none to use."""
    try:
        mounts = _mounts()
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            key = "pids" if "pids" in controllers.split(",") else "" if not controllers else None
            if key is not None and key in mounts:
                folder = mounts[key] / path.lstrip("/")
                if key == "pids" or "pids" in (folder / "cgroup.controllers").read_text().split():
                    return folder
    except (OSError, ValueError):
        return None
    return None


def of(pid: int, root: Path | None = None) -> Path | None:
    folder = root or base()
    return folder / f"{PREFIX}{pid}" if folder is not None else None


def enter(max_processes: int) -> Path:
    """Move this process into a pids cgroup of its own of at most ``max_processes`` tasks (threads count)."""
    root = base()
    if root is None:
        raise OSError("no pids cgroup controller is mounted for this process")
    folder = of(os.getpid(), root)
    assert folder is not None
    folder.mkdir()
    try:
        if not (folder / "pids.max").exists():  # cgroup v2: enable the controller for the sandbox's children
            (root / "cgroup.subtree_control").write_text("+pids")
        (folder / "pids.max").write_text(str(max_processes))
        (folder / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        folder.rmdir()
        raise
    return folder


def stop(pid: int) -> None:
    """Kill every process in the worker's cgroup (it may have none) and remove it."""
    folder = of(pid)
    if folder is None or not folder.is_dir():
        return
    for _ in range(100):
        try:
            members = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not members:
            break
        for member in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(member, signal.SIGKILL)
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        folder.rmdir()


def sweep() -> None:
    """Remove the empty worker cgroups a sandbox that was killed left behind (one in use is busy: kept)."""
    root = base()
    if root is None:
        return
    with contextlib.suppress(OSError):
        for folder in root.glob(f"{PREFIX}*"):
            with contextlib.suppress(OSError):
                folder.rmdir()
