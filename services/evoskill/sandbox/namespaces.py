"""Linux namespaces, mounts and capabilities for an environment worker, through libc (3.11 has no os.unshare).

Each function does one thing and raises OSError naming what failed; confine.py decides what to try and what a
failure falls back to.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_MS_BIND, _MS_REC, _MS_SLAVE = 0x1000, 0x4000, 0x80000
_SYS_MOUNT_SETATTR = 442  # the same on every architecture (syscalls numbered since 5.1 share numbers)
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAP_LAST = 63  # above the kernel's last capability, PR_CAPBSET_DROP answers EINVAL

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def unshare(flags: int, what: str) -> None:
    """Enter new namespaces (the process must have one thread for CLONE_NEWUSER)."""
    _check(_libc.unshare(flags), what)


def map_self(uid: int, gid: int) -> None:
    """In a fresh user namespace: the same uid and gid as outside, the one mapping an unprivileged process may
    write (it keeps its files' ownership; processes are counted against RLIMIT_NPROC in this namespace)."""
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def loopback_up() -> None:
    """A fresh network namespace has only ``lo``, and it is down: bring it up, so the JVM and py4j talk."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sh22x", b"lo", 0)  # struct ifreq: name, flags
        flags = struct.unpack("16sh22x", fcntl.ioctl(s, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | _IFF_UP))


def _mount_setattr(path: str, set_: int, clear: int) -> None:
    attr = _MountAttr(set_, clear, 0, 0)
    result = _libc.syscall(ctypes.c_long(_SYS_MOUNT_SETATTR), ctypes.c_int(_AT_FDCWD), path.encode(),
                           ctypes.c_uint(_AT_RECURSIVE), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))
    _check(int(result), f"mount_setattr {path}")


def read_only_but(writable: list[str], proc: bool = False) -> None:
    """In a fresh mount namespace: every mount read-only (kernel 5.12+), but bind mounts of the ``writable``
    folders (and /proc as it was, with ``proc``). Mounts are made slaves first, so nothing done here reaches
    the host's namespace."""
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None), "making mounts private")
    _mount_setattr("/", _MOUNT_ATTR_RDONLY, 0)
    if proc:
        _mount_setattr("/proc", 0, _MOUNT_ATTR_RDONLY)
    for folder in writable:
        real = os.path.realpath(folder).encode()
        _check(_libc.mount(real, real, None, _MS_BIND | _MS_REC, None), f"bind-mounting {folder}")
        _mount_setattr(real.decode(), 0, _MOUNT_ATTR_RDONLY)


def drop_capabilities() -> None:
    """No capability in any set, nor in the bounding set (so no exec gives one back)."""
    for cap in range(_CAP_LAST + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the kernel's last capability
                break
            _check(-1, f"dropping capability {cap} from the bounding set")
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(_libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), (ctypes.c_uint32 * 6)()), "capset")
