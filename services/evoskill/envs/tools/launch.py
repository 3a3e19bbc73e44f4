"""Starts one tool process under the sandbox's limits, then becomes it (exec).

Run as a file (``python -I -S launch.py PARENT_PID MEMORY_MB -- COMMAND ...``), so it imports nothing of
evoskill. The tool process gets its own process group (the caller starts it in a new session), so a hanging
tool is stopped with its children; it dies with the process that started it (PR_SET_PDEATHSIG: a worker the
sandbox kills leaves no server behind); and its address space is capped (a runaway tool fails its call, not
the worker). It inherits the worker's confinement (no new privileges, no core dumps, bounded files).
"""

import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, memory_mb, separator, command = int(argv[1]), int(argv[2]), argv[3], argv[4:]
    if separator != "--" or not command:
        sys.exit("usage: launch.py PARENT_PID MEMORY_MB -- COMMAND [ARG ...]")
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the tie was made
        os._exit(1)
    if memory_mb > 0:
        cap = memory_mb << 20
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
