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
from evoskill.core.learn import tokens
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


def features_one_by_one(by_seg: dict[int, list[tuple[int, tuple[int, ...]]]],
                       cands: list[tuple[tuple[int, ...], bool]]) -> tuple[np.ndarray, np.ndarray]:
    """`StateTokens.features` as it was computed until 2026-12-07, one candidate and one token at a time with sets and
    dicts (`bench reader`'s baseline, and the tests' reference): the state's clauses by segment, `by_seg` as
    `TokenFeaturizer` reads them."""
    notes, room = by_seg.get(tokens.NOTES, []), by_seg.get(tokens.OBSERVATION, []) + by_seg.get(tokens.INVENTORY, [])
    sets = [{t for _, c in by_seg.get(s, []) for t in c} for s in tokens.MATCHED_SEGMENTS]
    pairs = [{(c[k], c[k + gap]) for _, c in group for gap in (1, 2) for k in range(len(c) - gap)}
             for group in (notes, room)]
    lines = [[number for number, _ in group] for group in (notes, room)]
    holders: list[dict[int, list[int]]] = [{}, {}]
    for held, group in zip(holders, (notes, room), strict=True):
        for position, (_, clause) in enumerate(group):
            for t in set(clause):
                held.setdefault(t, []).append(position)
    rows, named = [], []
    for ids, seen in cands:
        overlaps = []
        for numbers, held in zip(lines, holders, strict=True):
            counts, scores = [0] * len(numbers), [0.0] * len(numbers)
            for t in set(ids):
                for position in held.get(t, ()):
                    counts[position] += 1
                    scores[position] += 1.0 / len(held[t])
            overlaps.append((counts, scores))
        coverage = [max(counts, default=0) / len(set(ids)) for counts, _ in overlaps]
        rows += [[token in s for s in sets] + ([(ids[t - 1], token) in p for p in pairs] if t else [False, False])
                 + coverage + [t == 0, seen] for t, token in enumerate(ids)]
        best = []
        for numbers, (_, scores) in zip(lines, overlaps, strict=True):
            top = max(scores, default=0.0)
            best.append([n for score, n in zip(scores, numbers, strict=True) if top > 0 and score >= top - 1e-9])
        named.append([*(best[0] + [0] * tokens.NOTE_LINES)[:tokens.NOTE_LINES], best[1][0] if best[1] else 0])
    return np.asarray(rows, np.float32).reshape(-1, len(tokens.MATCH_FEATURES)), np.asarray(named, np.int64)


def clauses_by_segment(state: tokens.StateTokens) -> dict[int, list[tuple[int, tuple[int, ...]]]]:
    """A read state's clauses under their segments ((clause number, token ids)), as `TokenFeaturizer` built them."""
    by_seg: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for number in np.unique(state.clause):
        at = state.clause == number
        if int(state.seg[at][0]) in tokens.MATCHED_SEGMENTS:
            by_seg.setdefault(int(state.seg[at][0]), []).append((int(number), tuple(state.ids[at].tolist())))
    return by_seg


def time_features(featurizer: Any, goal_and_text: tuple[str, str], candidates: list[tuple[str, str]],
                  repeats: int) -> dict[str, float]:
    """A state's candidate features read one by one (the baseline) and at once, on a state not read before each
    time (as search meets them), ABBA; the median ms of each, and whether they agree."""
    state = featurizer.state(*goal_and_text)
    by_seg, cands = clauses_by_segment(state), [featurizer.candidate(text) for text, _ in candidates]
    seconds: dict[str, list[float]] = {"one_by_one": [], "at_once": []}
    got = {}
    for _ in range(repeats):
        for name in ("one_by_one", "at_once", "at_once", "one_by_one"):
            started = time.perf_counter()
            got[name] = (features_one_by_one(by_seg, cands) if name == "one_by_one" else
                         tokens.StateTokens(state.ids, state.seg, state.clause, by_seg).features(cands))
            seconds[name].append(time.perf_counter() - started)
    agree = bool(np.allclose(got["one_by_one"][0], got["at_once"][0], rtol=1e-6)
                 and np.array_equal(got["one_by_one"][1], got["at_once"][1]))
    return {"features_one_by_one_ms": 1000 * statistics.median(seconds["one_by_one"]),
            "features_at_once_ms": 1000 * statistics.median(seconds["at_once"]), "features_agree": agree}


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
                         "current_ms": 1000 * statistics.median(seconds["current"]), "max_difference": difference,
                         **time_features(published.featurizer, goal_and_text, candidates, repeats)})
    result = summarise(rows) | {"weights": str(weights), "policy": str(policy), "library": str(library),
                                "repeats": repeats, "rows": rows}
    show(result)
    if json_path is not None:
        write_report(json_path, result, Settings())
    return result


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    published = sum(r["published_ms"] for r in rows)
    current = sum(r["current_ms"] for r in rows)
    one_by_one = sum(r["features_one_by_one_ms"] for r in rows)
    at_once = sum(r["features_at_once_ms"] for r in rows)
    return {"states": len(rows), "candidates_median": statistics.median(r["candidates"] for r in rows),
            "features_one_by_one_ms_per_state": one_by_one / len(rows),
            "features_at_once_ms_per_state": at_once / len(rows),
            "features_ratio": one_by_one / at_once, "features_agree": all(r["features_agree"] for r in rows),
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
    features = Table("candidate features read one by one, ms / state", "at once, ms / state", "one by one / at once",
                     "the same features", title="θ's inputs for a state not read before (the candidates' features)")
    features.add_row(f"{result['features_one_by_one_ms_per_state']:.1f}",
                     f"{result['features_at_once_ms_per_state']:.1f}", f"{result['features_ratio']:.2f}×",
                     "yes" if result["features_agree"] else "NO")
    Console().print(table, features)


def run_cloning_step_bench(json_path: Path | None, library: Path, batches: int, repeats: int) -> dict[str, Any]:
    """θ's cloning step as the learner takes it (its loss on a batch of the library, forward and backward, on the
    learner's torch threads) with the reader's training kernels and with its serving kernels (those of the exported
    graph, which trained θ until 2026-12-07), the same weights and batches, ABBA per round; the median ms of a step
    of each and the largest difference of their logits and gradients."""
    import torch

    from evoskill.core.learn.reader import ReaderNet
    from evoskill.learner.trainer import PolicyTrainer

    class ServingKernels(ReaderNet):
        train_kernels = ReaderNet.serve_kernels

    with tempfile.TemporaryDirectory() as state:
        settings = Settings(state_dir=Path(state))
        torch.set_num_threads(settings.learner.torch_threads)  # as the learner service sets it
        trainer = PolicyTrainer(settings)
        try:
            trainer.import_episodes(list(read_jsonl(library)))
            learner, replay, size = trainer.learner, trainer.replay, settings.learner.batch_size
            if not isinstance(learner.net, ReaderNet):
                raise ValueError(f"θ's encoder is {learner.net_config.encoder!r}; this benchmark times the reader")
            drawn = [replay.sample(size) for _ in range(batches)]
            if not drawn[0].examples:
                raise ValueError(f"{library}: no step with candidates to train on")
            steps = [learner.collate(d.examples, d.weights, rename=True) for d in drawn]
            serving = ServingKernels(learner.net.config)
            serving.load_state_dict(learner.net.state_dict())
            nets = {"serve": serving, "train": learner.net}

            def backward(name: str, batch: Any) -> None:
                learner.net = nets[name]  # Learner.losses reads θ from here
                try:
                    nets[name].train()
                    nets[name].zero_grad(set_to_none=True)
                    learner.losses(batch)[0]["loss"].backward()
                finally:
                    learner.net = nets["train"]

            for name in nets:
                backward(name, steps[0])
            grads = [(a.grad, b.grad) for a, b in zip(serving.parameters(), nets["train"].parameters(), strict=True)
                     if a.grad is not None and b.grad is not None]
            logits = {name: net(*steps[0].inputs)[0].detach() for name, net in nets.items()}
            seconds: dict[str, list[float]] = {name: [] for name in nets}
            for _ in range(repeats):
                for name in ("serve", "train", "train", "serve"):
                    started = time.perf_counter()
                    for batch in steps:
                        backward(name, batch)
                    seconds[name].append((time.perf_counter() - started) / len(steps))
            mask = steps[0].mask
            shapes = [tuple(batch.inputs[i].shape[1] for i in (0, 3, 8)) for batch in steps]  # L, N, A
        finally:
            trainer.close()
    serve_ms, train_ms = (1000 * statistics.median(seconds[n]) for n in ("serve", "train"))
    result = {
        "library": str(library), "batches": batches, "repeats": repeats, "batch_size": size,
        "torch_threads": settings.learner.torch_threads,
        "state_tokens_mean": statistics.mean(s[0] for s in shapes),
        "candidate_tokens_mean": statistics.mean(s[1] for s in shapes),
        "candidates_mean": statistics.mean(s[2] for s in shapes),
        "serve_kernels_ms_per_step": serve_ms, "train_kernels_ms_per_step": train_ms, "ratio": serve_ms / train_ms,
        "max_logit_difference": float((logits["serve"] - logits["train"])[mask].abs().max()),
        "max_gradient_difference": max(float((a - b).abs().max()) for a, b in grads),
    }
    table = Table("batches × size", "state / candidate tokens, candidates (mean)", "serving kernels ms / step",
                  "training kernels ms / step", "serving / training", "largest logit / gradient difference",
                  title=f"θ's cloning step (forward and backward, {result['torch_threads']} torch thread(s)), "
                        "the same weights and batches")
    table.add_row(f"{batches} × {size}", f"{result['state_tokens_mean']:.0f} / {result['candidate_tokens_mean']:.0f}, "
                  f"{result['candidates_mean']:.0f}", f"{serve_ms:.1f}", f"{train_ms:.1f}", f"{result['ratio']:.2f}×",
                  f"{result['max_logit_difference']:.1e} / {result['max_gradient_difference']:.1e}")
    Console().print(table)
    if json_path is not None:
        write_report(json_path, result, Settings())
    return result
