"""The test suite's wall time against an earlier revision's, on the tests both have, side by side.

    .venv/bin/python -m tests.suite_time --before c0d67e8^ --rounds 2 --json docs/figures/suite-time.json

Checks the earlier revision out in a temporary git worktree, takes the test ids both trees collect (a test
renamed or added since is left out: its time says nothing about the change), and runs them in each tree in
turn, `--rounds` times, alternating, so that a machine busy with other work weighs on both alike. Both run on
this checkout's virtual environment. Prints each run's wall time and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def collected(tree: Path) -> set[str]:
    """The test ids pytest collects in `tree` (its own default selection)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=tree, env=_env(tree), capture_output=True, text=True, check=True).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def run(tree: Path, ids: list[str]) -> tuple[float, str]:
    """Wall seconds of one pytest run of `ids` in `tree`, and pytest's last line."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ids], cwd=tree,
                          env=_env(tree), capture_output=True, text=True)
    seconds = time.perf_counter() - started
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode != 0:
        raise SystemExit(f"pytest failed in {tree} (exit {done.returncode}): {last}")
    return seconds, last


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree / "services")}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier revision (any git revision)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    before, now = _git("rev-parse", args.before), _git("rev-parse", "HEAD")
    uncommitted = bool(_git("status", "--porcelain", "--untracked-files=no"))  # "now" is the working tree
    with tempfile.TemporaryDirectory() as scratch:
        old = Path(scratch) / "before"
        _git("worktree", "add", "--detach", str(old), before)
        try:
            old_ids, new_ids = collected(old), collected(ROOT)
            ids = sorted(old_ids & new_ids)
            print(f"{len(old_ids)} tests before, {len(new_ids)} now, {len(ids)} in both")
            times: dict[str, list[float]] = {"before": [], "now": []}
            for round_ in range(args.rounds):
                for name, tree in (("before", old), ("now", ROOT)):
                    seconds, last = run(tree, ids)
                    times[name].append(seconds)
                    print(f"round {round_ + 1} {name}: {seconds:.0f} s ({last})", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    ratio = statistics.median(times["now"]) / statistics.median(times["before"])
    print(f"now / before (medians): {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({
            "before": before, "now": now, "now_uncommitted_changes": uncommitted,
            "tests_before": len(old_ids), "tests_now": len(new_ids),
            "tests_compared": len(ids), "wall_s": times, "ratio_of_medians": ratio,
            "command": ["python", "-m", "tests.suite_time", *sys.argv[1:]],
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()
