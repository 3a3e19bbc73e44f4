"""The Java runtime TextWorldExpress and ScienceWorld need, and shutting down the py4j JVMs they start."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from typing import Any

log = logging.getLogger(__name__)
# A JVM's heap may take this share of its worker's memory cap; the rest is the JVM's own (metaspace, code,
# threads: ~150 MiB) and the worker's Python.
HEAP_SHARE = 1 / 3


def heap_options(memory_mb: int) -> str:
    """JAVA_TOOL_OPTIONS that keep a worker's JVM under its memory cap (`sandbox.memory_mb`). Left alone, the heap
    may grow to a quarter of the machine's memory before it is collected: a ScienceWorld JVM, which loads a
    fresh world at every search probe's reset, passed 1.4 GiB resident within two searches and was then killed
    by the worker's 2 GiB memory watch, the next session's `open` on that pooled worker included. The serial
    collector adds no collector threads on a machine of few cores."""
    return f"-Xmx{max(int(memory_mb * HEAP_SHARE), 128)}m -XX:+UseSerialGC"


def java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.isfile(os.path.join(java_home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def java_process(env: Any) -> subprocess.Popen[bytes] | None:
    gateway = getattr(env, "_gateway", None)
    proc = getattr(gateway, "java_process", None)
    return proc if isinstance(proc, subprocess.Popen) else None


def shutdown_jvm(env: Any, timeout: float = 5.0) -> None:
    """Close a TextWorldExpressEnv/ScienceWorldEnv and make sure its JVM has exited.

    The packages' own ``close()`` asks the gateway to shut down and writes a newline to the JVM's
    stdin; we then wait for the process (killing it after ``timeout``) and disarm their
    ``__del__``, which would otherwise call ``close()`` a second time on a dead gateway.
    """
    proc = java_process(env)
    try:
        env.close()
    except Exception:  # the JVM may already be gone
        log.debug("error while closing JVM env", exc_info=True)
    with contextlib.suppress(Exception):
        env.close = lambda: None  # their __del__ calls self.close()
    if proc is None:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()
