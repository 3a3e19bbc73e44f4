"""What ran, recorded in every JSON report and each published policy (the `run` object): the package and the
libraries that decide results, the git revision of the source tree, Python, the command line, the host and its
CPU, when, and the settings in effect (secrets masked), as W&B and MLflow record a run's config and source version.

The CPU is there because θ depends on it: torch, MKL and oneDNN pick their kernels by the instruction set, and the
same cloning at the same seed gives another θ on AVX-512 than on AVX2 (`evoskill bench kernels`)."""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from evoskill.platform.config import Settings

# The libraries whose versions change what a run measures (search and θ numerics, environments, the runtime).
LIBRARIES = ("torch", "numpy", "numba", "onnxruntime", "temporalio", "grpcio", "protobuf", "textworld",
             "textworld-express", "scienceworld")
SOURCE = Path(__file__).resolve().parents[3]  # the checkout of an editable install: services/evoskill/platform


@functools.cache
def git_revision() -> str:
    """The commit the package runs from, with "+dirty" when tracked files changed; "" outside a git checkout (a
    wheel, an image): only a checkout whose top level holds this source counts, not one a venv sits in."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, text=True, timeout=10)
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        if not (top := git("rev-parse", "--show-toplevel")) or Path(top).resolve() != SOURCE:
            return ""
        head = git("rev-parse", "HEAD")
        return head + ("+dirty" if head and git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.cache
def cpu_record() -> dict[str, Any]:
    """The CPU's model, the widest vector instruction set it offers (what torch, MKL and oneDNN dispatch on) and
    its logical cores; what Linux's /proc/cpuinfo says, else what `platform` knows."""
    model, flags = platform.processor(), set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not flags:
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    isa = next((name for flag, name in (("avx512f", "avx512"), ("avx2", "avx2"), ("avx", "avx")) if flag in flags),
               platform.machine())
    return {"model": model, "vector_isa": isa, "logical_cores": os.cpu_count() or 0}


@functools.cache
def library_versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def run_record(settings: Settings) -> dict[str, Any]:
    """The `run` object of a report: `settings` as the run used them (a command's overrides applied)."""
    from evoskill.platform.telemetry import package_version

    return {
        "evoskill": package_version(),
        "git_revision": git_revision(),
        "python": platform.python_version(),
        "libraries": library_versions(),
        # `evoskill ...` however it was started (the script, `python -m evoskill.cli`): no path of this machine
        "command": ["evoskill", *sys.argv[1:]] if _is_cli(sys.argv[0]) else list(sys.argv),
        "host": platform.node(),
        "cpu": cpu_record(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": settings.model_dump(mode="json"),
    }


def _is_cli(argv0: str) -> bool:
    path = Path(argv0)
    return path.name == "evoskill" or path.resolve() in (SOURCE / "services/evoskill/cli.py",
                                                         SOURCE / "services/evoskill/__main__.py")


def write_report(path: Path, report: dict[str, Any], settings: Settings) -> None:
    """`report` as JSON with its `run` object, its folder created; paths under the working folder are written
    relative to it, so a report committed under docs/figures names no folder of the machine that ran it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**report, "run": run_record(settings)}, indent=2) + "\n"
    for folder in dict.fromkeys((str(Path.cwd()), str(Path.cwd().resolve()))):
        text = text.replace(folder.rstrip("/") + "/", "")
    path.write_text(text)
