"""What an environment worker gives up when it starts, before it runs any environment or tool code.

A worker runs code evoskill did not write (a JVM, tw-make, user tools), so it starts with less than the
service that spawned it:

- no new privileges (PR_SET_NO_NEW_PRIVS): no setuid binary it runs can gain rights it does not have;
- no core dumps (a crash must not write the process's memory, secrets included, to disk);
- bounded open files and file size (a runaway tool cannot exhaust the host's descriptors or fill its disk);
- no service secrets in its environment (API keys, evoskill's settings file).

The address space is not capped with RLIMIT_AS: the JVM reserves far more virtual memory than it uses, so
the worker's resident memory (with the JVM's) is checked after each call instead (worker.py).
"""

from __future__ import annotations

import ctypes
import os
import resource

PR_SET_NO_NEW_PRIVS = 38
MAX_OPEN_FILES = 4096
MAX_FILE_BYTES = 2 << 30  # a generated TextWorld game is a few hundred KiB
SECRET_MARKERS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")


def _lower(limit: int, value: int) -> None:
    soft, hard = resource.getrlimit(limit)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(limit, (min(cap, soft) if soft != resource.RLIM_INFINITY else cap, cap))


def is_secret(name: str) -> bool:
    return name.startswith("EVOSKILL_") or any(marker in name.upper() for marker in SECRET_MARKERS)


def confine() -> None:
    """Apply the limits above to this process (and so to every process it starts)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _lower(resource.RLIMIT_NOFILE, MAX_OPEN_FILES)
    _lower(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    for name in [n for n in os.environ if is_secret(n)]:
        del os.environ[name]
