"""What an environment worker gives up when it starts, before it runs any environment or tool code.

A worker runs code evoskill did not write (a JVM, tw-make, user tools), so it starts with less than the
service that spawned it, and every process it starts (the JVM, tool processes: envs/tools/launch.py) inherits
all of it:

- a working folder of its own (cwd, HOME and TMPDIR), made by the parent and removed with the worker;
- a network namespace of its own with only loopback (up: the JVM and py4j talk over it), so no connection
  leaves the worker, unless its env needs the network (`sandbox.network`);
- a mount namespace where every file is read-only but its folder and the game cache (`sandbox.private_files`);
- as root, the unprivileged `sandbox.run_as` user (default nobody), where that user can run the interpreter;
- bounded processes (RLIMIT_NPROC counted in a user namespace of its own; as root, a pids cgroup), CPU time
  per process (RLIMIT_CPU), open files and file size; no core dumps;
- no new privileges (PR_SET_NO_NEW_PRIVS) and no capabilities: no setuid binary or file capability it runs
  gains anything;
- no service secrets in its environment (API keys, evoskill's settings file).

The kernel refuses some of these in some places (unprivileged user namespaces off, a container's seccomp
profile, no cgroup to write): each refusal falls back to what remains and is reported in the
:class:`Confinement` the worker sends its parent, which logs it (docs/operations.md, "Bad input and faults").
The address space is not capped here with RLIMIT_AS: the JVM reserves far more virtual memory than it uses,
so the parent watches the resident memory of the worker's whole process tree (worker.py); tool processes get
an RLIMIT_AS of their own (launch.py).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import resource
import sys
from dataclasses import dataclass, field
from pathlib import Path

from evoskill.sandbox import cgroup, namespaces
from evoskill.sandbox.namespaces import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER

PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
SECRET_MARKERS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class Policy:
    """What a worker is allowed (the sandbox's settings, `SandboxSettings`)."""

    network: bool = False  # the host's network (an env that needs it), else a namespace of its own
    private_files: bool = True
    writable: tuple[str, ...] = ()  # besides its own folder (the game cache)
    run_as: str = "nobody"  # when the sandbox runs as root; "" keeps root
    max_processes: int = 512  # tasks (threads count): the worker, its JVM, its tool processes
    cpu_s: int = 3600  # CPU seconds of one process
    max_open_files: int = 4096
    max_file_mb: int = 2048  # a generated TextWorld game is a few hundred KiB


@dataclass
class Confinement:
    """What a worker got; ``notes`` say what fell back, and why."""

    user: str = ""
    network_isolated: bool = False
    private_files: bool = False
    processes: str = ""  # how they are bounded: "user namespace", "cgroup", "per user"; "" not at all
    notes: list[str] = field(default_factory=list)


def _lower(limit: int, value: int) -> None:
    soft, hard = resource.getrlimit(limit)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(limit, (min(cap, soft) if soft != resource.RLIM_INFINITY else cap, cap))


def is_secret(name: str) -> bool:
    return name.startswith("EVOSKILL_") or any(marker in name.upper() for marker in SECRET_MARKERS)


def _needed_paths() -> list[str]:
    """What a worker's processes read: the interpreter, the standard library, every import path."""
    return [os.path.realpath(sys.executable), os.path.dirname(os.__file__),
            *[p for p in sys.path if p and os.path.isdir(p)]]


def _usable_by(user: pwd.struct_passwd) -> str:
    """Whether ``user`` can run this interpreter and read its imports: "" if so, else the first path it cannot
    (checked in a child that becomes the user: groups and ACLs count, as they will)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            bad = next((p for p in _needed_paths() if not os.access(p, os.R_OK | os.X_OK)), "")
        except OSError as exc:
            bad = str(exc)
        os.write(write, bad.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    return answer


def _user_tasks(uid: int) -> int:
    """Tasks (threads) of ``uid`` now: what RLIMIT_NPROC counts where it counts per user."""
    total = 0
    for entry in Path("/proc").iterdir():
        try:
            lines = (entry / "status").read_text().splitlines() if entry.name.isdigit() else []
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        if fields and int(fields["Uid"].split()[0]) == uid:
            total += int(fields["Threads"])
    return total


def becomes(run_as: str) -> tuple[pwd.struct_passwd | None, str]:
    """The user a worker becomes (None: it stays who the sandbox is) and, when root stays root, why."""
    if os.geteuid() != 0 or not run_as:
        return None, ""
    try:
        user = pwd.getpwnam(run_as)
    except KeyError:
        return None, f"stays root: sandbox.run_as user {run_as!r} does not exist"
    if user.pw_uid == 0:
        return None, ""
    unusable = _usable_by(user)
    if unusable:
        return None, f"stays root: sandbox.run_as user {run_as!r} cannot read {unusable}"
    return user, ""


def _target(policy: Policy, got: Confinement) -> pwd.struct_passwd | None:
    user, why = becomes(policy.run_as)
    if why:
        got.notes.append(why)
    return user


def _namespaces(policy: Policy, folder: str, got: Confinement, proc: bool) -> None:
    flags = (0 if policy.network else CLONE_NEWNET) | (CLONE_NEWNS if policy.private_files else 0)
    if not flags:
        return
    try:
        namespaces.unshare(flags, "unshare(network, mounts)")
    except OSError as exc:
        got.notes.append(f"shares the host's network and files: {exc.strerror}")
        return
    if flags & CLONE_NEWNET:
        got.network_isolated = True
        try:
            namespaces.loopback_up()
        except OSError as exc:
            got.notes.append(f"loopback is down in its network namespace (JVM envs will fail): {exc}")
    if flags & CLONE_NEWNS:
        try:
            namespaces.read_only_but([folder, *policy.writable], proc)
            got.private_files = True
        except OSError as exc:
            got.notes.append(f"files are not read-only: {exc.strerror}")


def _own_user_namespace(got: Confinement) -> bool:
    uid, gid = os.getuid(), os.getgid()
    try:
        namespaces.unshare(CLONE_NEWUSER, "unshare(user)")
        namespaces.map_self(uid, gid)
    except OSError as exc:
        got.notes.append(f"no user namespace of its own: {exc.strerror or exc}")
        return False
    return True


def _cgroup(policy: Policy, got: Confinement) -> None:
    """Root is never held to RLIMIT_NPROC: a pids cgroup of its own bounds its processes."""
    try:
        cgroup.enter(policy.max_processes)
        got.processes = "cgroup"
    except OSError as exc:
        got.notes.append(f"processes are not bounded: root is not held to RLIMIT_NPROC and no pids cgroup could "
                         f"be made ({exc.strerror or exc})")


def _nproc(policy: Policy, in_userns: bool, got: Confinement) -> None:
    if in_userns:  # RLIMIT_NPROC counts the processes of this namespace only: this worker's
        _lower(resource.RLIMIT_NPROC, policy.max_processes)
        got.processes = "user namespace"
        return
    uid = os.getuid()  # counted with every process of this user on the host: a share above what it has now
    _lower(resource.RLIMIT_NPROC, _user_tasks(uid) + policy.max_processes)
    got.processes = "per user"
    got.notes.append(f"processes counted with every other process of uid {uid}")


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _become(user: pwd.struct_passwd, folder: str, got: Confinement) -> bool:
    """Be ``user`` from now on, in a user namespace of its own where one can be made (whether it was)."""
    os.chown(folder, user.pw_uid, user.pw_gid)
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # a process that changed uid may not write its own uid_map otherwise
    try:
        return _own_user_namespace(got)
    finally:
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def confine(policy: Policy, folder: str) -> Confinement:
    """Apply ``policy`` to this process (one thread, nothing started yet) with ``folder`` as its own."""
    got = Confinement()
    root = os.geteuid() == 0
    target = _target(policy, got)
    if root and target is None:
        _cgroup(policy, got)  # while /sys is writable
    in_userns = not root and _own_user_namespace(got)  # gives the capabilities to make the namespaces below
    if root or in_userns:  # a user to become writes its uid_map under /proc later (its DAC keeps it from the rest)
        _namespaces(policy, folder, got, proc=target is not None)
    elif not policy.network or policy.private_files:
        got.notes.append("shares the host's network and files: no user namespace to make them in")
    if target is not None:
        in_userns = _become(target, folder, got)  # its processes counted apart from every other nobody's
    if not root or target is not None:
        _nproc(policy, in_userns, got)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _lower(resource.RLIMIT_NOFILE, policy.max_open_files)
    _lower(resource.RLIMIT_FSIZE, policy.max_file_mb << 20)
    _lower(resource.RLIMIT_CPU, policy.cpu_s)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    try:
        namespaces.drop_capabilities()
    except OSError as exc:
        got.notes.append(f"keeps its capabilities: {exc}")
    got.user = _name(os.geteuid())
    os.chdir(folder)
    for name in [n for n in os.environ if is_secret(n)]:
        del os.environ[name]
    os.environ.update(HOME=folder, TMPDIR=folder)
    return got
