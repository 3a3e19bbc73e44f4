"""Reader benchmark: θ's inference time on a library's states, the policy file as it was published beside the
same weights exported by this code, in one run, with the largest difference of their outputs.

θ scores every candidate of a state at each expansion, so with ScienceWorld's 400-1,600 listed actions its
inference is most of the planner's time. The weights come from a learner's `weights/vNNNNNN.pt`, the published
file from its `policies/`; the states are the library's, read as the planner reads them (`state_text`). The two
run on one onnxruntime thread each, in ABBA order per state.

    evoskill bench reader --weights LEARNER/weights/v000001.pt --policy LEARNER/policies/policy-v000001.onnx \\
        --library LIB.jsonl --json bench-reader.json
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from evoskill.core.episode_record import steps_with_states
from evoskill.core.state_text import state_text
from evoskill.envs.base import heuristic_template
from evoskill.library.jsonl import read_jsonl
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

State = tuple[tuple[str, str], list[tuple[str, str]]]


def library_states(library: Path, limit: int) -> list[State]:
    """The first `limit` states of the library with candidates: ((goal, observation text), [(action, template)])."""
    states: list[State] = []
    for episode in read_jsonl(library):
        for before, step in steps_with_states(episode):
            actions, templates = list(step.target.actions), list(step.target.templates)
            if actions:
                # a library written without templates: each action's verb with slots, as the sandbox would say
                templates = templates or [heuristic_template(a) for a in actions]
                states.append((state_text(before), list(zip(actions, templates, strict=True))))
            if len(states) == limit:
                return states
    return states


def exported_now(weights: Path, directory: Path) -> Path:
    """The weights of a learner's version exported by this code."""
    import torch

    from evoskill.core.learn.export import export_policy
    from evoskill.core.learn.networks import NetConfig, SkillVocab
    from evoskill.core.learn.reader import ReaderNet

    state = torch.load(weights, weights_only=True)
    config = NetConfig.from_dict(state["net_config"])
    if config.encoder != "reader":
        raise ValueError(f"{weights}: θ's encoder is {config.encoder!r}; this benchmark times the reader")
    net = ReaderNet(config)
    net.load_state_dict(state["net"])
    return export_policy(net, SkillVocab.from_dict(state["vocab"]), state["featurizer"], directory, 1)


def run_reader_bench(json_path: Path | None, weights: Path, policy: Path, library: Path, states: int,
                     repeats: int) -> dict[str, Any]:
    from evoskill.core.learn.data import make_inputs
    from evoskill.core.learn.export import OnnxPolicy

    read = library_states(library, states)
    if not read:
        raise ValueError(f"{library}: no state with candidates")
    published = OnnxPolicy(policy, cache_dir=Settings().state_dir / "cache" / "features")
    with tempfile.TemporaryDirectory() as tmp:
        current = OnnxPolicy(exported_now(weights, Path(tmp)), featurizer=published.featurizer)
        rows = []
        for (goal_and_text, candidates) in read:
            inputs = make_inputs(published.featurizer, published.vocab.get, [goal_and_text], [candidates])
            seconds: dict[str, list[float]] = {"published": [], "current": []}
            outputs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
            for _ in range(repeats):
                for name in ("published", "current", "current", "published"):
                    started = time.perf_counter()
                    outputs[name] = (published if name == "published" else current).run(inputs)
                    seconds[name].append(time.perf_counter() - started)
            mask = inputs.mask
            difference = max(float(np.abs(outputs["published"][0][mask] - outputs["current"][0][mask]).max()),
                             float(np.abs(outputs["published"][1] - outputs["current"][1]).max()))
            rows.append({"candidates": len(candidates), "published_ms": 1000 * statistics.median(seconds["published"]),
                         "current_ms": 1000 * statistics.median(seconds["current"]), "max_difference": difference})
    result = summarise(rows) | {"weights": str(weights), "policy": str(policy), "library": str(library),
                                "repeats": repeats, "rows": rows}
    show(result)
    if json_path is not None:
        write_report(json_path, result, Settings())
    return result


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    published = sum(r["published_ms"] for r in rows)
    current = sum(r["current_ms"] for r in rows)
    return {"states": len(rows), "candidates_median": statistics.median(r["candidates"] for r in rows),
            "candidates_max": max(r["candidates"] for r in rows), "published_ms_per_state": published / len(rows),
            "current_ms_per_state": current / len(rows), "ratio": published / current,
            "max_difference": max(r["max_difference"] for r in rows)}


def show(result: dict[str, Any]) -> None:
    table = Table("states", "candidates (median / max)", "published ms / state", "current ms / state",
                  "published / current", "largest output difference",
                  title="θ's inference (onnxruntime, 1 thread), the same weights")
    table.add_row(str(result["states"]), f"{result['candidates_median']:.0f} / {result['candidates_max']}",
                  f"{result['published_ms_per_state']:.1f}", f"{result['current_ms_per_state']:.1f}",
                  f"{result['ratio']:.2f}×", f"{result['max_difference']:.2e}")
    Console().print(table)
