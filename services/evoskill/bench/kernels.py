"""Kernels benchmark: does cloning give the same θ again, and on another machine? The learner's own training
(`PolicyTrainer.train`: a library's first episodes imported, `steps` updates at one seed, θ exported) is run in
fresh processes, twice as this machine runs it and once per library held to its AVX2 kernels, and each θ's loss
and digest (SHA-256 of its parameters) are printed side by side.

Two runs here agree bit for bit; holding one library to AVX2 stands in for a machine without AVX-512, where
torch (ATen), MKL and oneDNN pick those kernels themselves. A θ that changes with them changes from machine to
machine, so figures are compared where they ran together (`bench quality` plays its rows in one run) and every
report names its CPU (`run.cpu`).

    evoskill bench kernels --library LIB.jsonl --episodes 100 --steps 100 --json bench-kernels.json
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# (row, the environment it trains under); the first two are this machine's own choice, run twice.
PATHS: tuple[tuple[str, dict[str, str]], ...] = (
    ("this machine", {}),
    ("this machine, again", {}),
    ("torch's ATen at AVX2", {"ATEN_CPU_CAPABILITY": "avx2"}),
    ("MKL at AVX2", {"MKL_CBWR": "AVX2"}),
    ("oneDNN at AVX2", {"ONEDNN_MAX_CPU_ISA": "AVX2"}),
    ("all three at AVX2", AVX2),
)


def clone_once(library: Path, episodes: int, steps: int, seed: int) -> dict[str, Any]:
    """θ cloned as the learner clones it, in this process: its losses, digest and the kernels torch chose."""
    import torch

    from evoskill.learner.trainer import PolicyTrainer
    from evoskill.library.jsonl import read_jsonl

    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state))
        torch.set_num_threads(settings.learner.torch_threads)  # as the learner service sets it
        trainer = PolicyTrainer(settings)
        try:
            trainer.import_episodes(list(itertools.islice(read_jsonl(library), episodes)))
            result = trainer.train(steps, seed=seed)
            digest = hashlib.sha256()
            for tensor in trainer.learner.net.state_dict().values():
                digest.update(tensor.detach().contiguous().numpy().tobytes())
        finally:
            trainer.close()
    return {"loss": result.losses["loss"], "digest": digest.hexdigest()[:16],
            "aten_kernels": torch.backends.cpu.get_cpu_capability(), "torch_threads": torch.get_num_threads()}


def run_kernels_bench(json_path: Path | None, library: Path, episodes: int, steps: int, seed: int) -> dict[str, Any]:
    console = Console()
    rows = []
    for name, pinned in PATHS:
        env = {k: v for k, v in os.environ.items() if k not in AVX2} | pinned
        done = subprocess.run([sys.executable, "-m", "evoskill.bench.kernels", str(library), str(episodes),
                               str(steps), str(seed)], env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{name}: the cloning process failed: {done.stderr.strip()[-2000:]}")
        rows.append({"path": name, "environment": pinned, **json.loads(done.stdout.strip().splitlines()[-1])})
    first = rows[0]["digest"]
    result = {
        "library": str(library), "episodes": episodes, "steps": steps, "seed": seed, "rows": rows,
        "repeatable": rows[1]["digest"] == first,
        "same_theta_as_this_machine": {r["path"]: r["digest"] == first for r in rows[2:]},
    }
    table = Table(title=f"θ cloned from {episodes} episodes, {steps} updates, seed {seed}")
    for column in ("kernels", "ATen chose", "loss", "θ digest", "same θ"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["path"], r["aten_kernels"], f"{r['loss']:.10f}", r["digest"],
                      "yes" if r["digest"] == first else "no")
    console.print(table)
    if json_path is not None:
        write_report(json_path, result, Settings())
        console.print(f"wrote {json_path}")
    return result


if __name__ == "__main__":  # one cloning, in the environment the parent chose; the last line is its JSON
    path, n_episodes, n_steps, train_seed = sys.argv[1:5]
    print(json.dumps(clone_once(Path(path), int(n_episodes), int(n_steps), int(train_seed))))
