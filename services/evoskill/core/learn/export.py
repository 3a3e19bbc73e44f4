"""θ for serving: the policy/value network as a versioned ONNX file, and the scorers the planner calls.

`export_policy` writes `policy-v000007.onnx` with dynamic batch and candidate axes (and token axes for
the reader). The file is self-contained: its metadata holds the skill vocabulary, the featuriser spec
and the network config (its `encoder` included), so a planner needs nothing else to encode text and
templates exactly as the learner did. Where the learner fitted a dynamics model beside θ, its weights are
there too (`evoskill.dynamics`, `OnnxPolicy.dynamics`); a file without them loads with `dynamics = None`
(search's curiosity from dynamics is then off).

`PolicyScorer.score(states, candidates) -> (priors, values)` is what search consumes:
states are (goal, observation text) pairs (see `data.state_text`), candidates are (action text,
template) pairs per state; priors are one softmax per state over its candidates. `OnnxPolicy`
runs the exported file on onnxruntime; `TorchPolicy` runs the live torch network (same features,
same answers, used in-process and to check the export). `unfit` says why a policy must not serve (a
weight or an output that is not finite): the learner asks it before publishing, the planner before loading.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from evoskill.core.learn.data import Inputs, TextEncoder, make_inputs, softmax_rows
from evoskill.core.learn.features import featurizer_from_spec
from evoskill.core.learn.networks import PolicyValueNet, SkillVocab
from evoskill.core.learn.reader import ReaderNet
from evoskill.core.learn.tokens import TokenFeaturizer
from evoskill.core.limits import MAX_ACTION
from evoskill.core.reward.dynamics import DynamicsWeights

OUTPUTS = ("logits", "value")
DYNAMICS_KEY = "evoskill.dynamics"
DEMONSTRATED_KEY = "evoskill.demonstrated"
MAX_DEMONSTRATED = 256  # = LearnerSettings.demonstrated_actions' bound
_FILE = re.compile(r"^policy-v(\d+)\.onnx$")

States = Sequence[tuple[str, str]]
Candidates = Sequence[Sequence[tuple[str, str]]]


def demonstrated_actions(raw: str) -> tuple[str, ...]:
    """The demonstrated actions a policy file's metadata names; ValueError naming what is wrong with them."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"its {DEMONSTRATED_KEY} metadata is not JSON ({exc.msg})") from None
    if not isinstance(value, list) or not all(isinstance(a, str) and 0 < len(a) <= MAX_ACTION for a in value):
        raise ValueError(f"its {DEMONSTRATED_KEY} metadata is not a list of action texts (1-{MAX_ACTION} chars)")
    if len(value) > MAX_DEMONSTRATED:
        raise ValueError(f"its {DEMONSTRATED_KEY} metadata names {len(value)} actions (at most {MAX_DEMONSTRATED})")
    return tuple(value)


def policy_file_name(version: int) -> str:
    return f"policy-v{version:06d}.onnx"


def latest_policy(directory: str | Path) -> Path | None:
    """The exported policy with the highest version in `directory`, if any."""
    found = [(int(m.group(1)), p) for p in Path(directory).glob("policy-v*.onnx") if (m := _FILE.match(p.name))]
    return max(found)[1] if found else None


def text_encoder_from_spec(spec: dict[str, Any], *, cache_dir: str | Path | None = None) -> TextEncoder:
    """What turns text into a policy's inputs: the token featuriser (reader) or a vector featuriser (mlp)."""
    if spec.get("kind") == "tokens":
        return TokenFeaturizer.from_spec(spec)
    return featurizer_from_spec(spec, cache_dir=cache_dir)


def export_policy(
    net: PolicyValueNet | ReaderNet,
    vocab: SkillVocab,
    featurizer_spec: dict[str, Any],
    directory: str | Path,
    version: int,
    *,
    opset: int = 17,
    dynamics: DynamicsWeights | None = None,
    demonstrated: Sequence[str] = (),
) -> Path:
    """Write the network as `directory/policy-v{version:06d}.onnx`, atomically (with `dynamics` in its
    metadata where given, and the demonstrated actions θ was taught that no environment listed); returns the
    path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cfg = net.config
    example = net.example_inputs()  # example shapes; every axis that varies per call is exported as dynamic
    dynamic = {**net.DYNAMIC_AXES, "logits": {0: "batch", 1: "candidates"}, "value": {0: "batch"}}
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".onnx.tmp")
    os.close(fd)
    was_training = net.training
    try:
        net.eval()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            # dynamo=False: the torch.export-based exporter needs onnxscript, which is not a dependency.
            torch.onnx.export(
                net,
                example,
                tmp,
                dynamo=False,
                input_names=list(net.INPUTS),
                output_names=list(OUTPUTS),
                dynamic_axes=dynamic,
                opset_version=opset,
            )
        model = onnx.load(tmp)
        meta = {
            "evoskill.policy_version": str(version),
            "evoskill.featurizer": json.dumps(featurizer_spec),
            "evoskill.vocab": json.dumps(vocab.to_dict()),
            "evoskill.net_config": json.dumps(cfg.to_dict()),
            **({DYNAMICS_KEY: dynamics.to_json()} if dynamics is not None else {}),
            **({DEMONSTRATED_KEY: json.dumps(list(demonstrated))} if demonstrated else {}),
        }
        for key, value in meta.items():
            model.metadata_props.add(key=key, value=value)
        onnx.save(model, tmp)
        path = directory / policy_file_name(version)
        os.replace(tmp, path)  # a planner polling the folder never sees a half-written file
        return path
    finally:
        net.train(was_training)
        if os.path.exists(tmp):
            os.unlink(tmp)


class PolicyScorer(Protocol):
    def score(self, states: States, candidates: Candidates) -> tuple[list[np.ndarray], np.ndarray]: ...


class _Scorer:
    """Features in, priors and values out; subclasses say how the network runs."""

    featurizer: TextEncoder
    vocab: SkillVocab

    def run(self, inputs: Inputs) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def score(self, states: States, candidates: Candidates) -> tuple[list[np.ndarray], np.ndarray]:
        """Priors (one array per state, over its candidates, summing to 1) and values [B]."""
        if len(states) != len(candidates):
            raise ValueError(f"{len(states)} states but {len(candidates)} candidate lists")
        if not states:
            return [], np.zeros(0, np.float32)
        # vocab.get, not add: a template first seen at serving time is the unknown skill.
        inputs = make_inputs(self.featurizer, self.vocab.get, states, candidates)
        logits, values = self.run(inputs)
        return softmax_rows(logits, inputs.mask), values.astype(np.float32)


class OnnxPolicy(_Scorer):
    """An exported policy on onnxruntime; builds the featuriser its metadata names unless given one."""

    def __init__(
        self,
        path: str | Path,
        featurizer: TextEncoder | None = None,
        *,
        cache_dir: str | Path | None = None,
        threads: int = 1,
    ) -> None:
        import onnxruntime as ort

        self.path = Path(path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        meta = self.session.get_modelmeta().custom_metadata_map
        self.version = int(meta["evoskill.policy_version"])
        self.featurizer_spec: dict[str, Any] = json.loads(meta["evoskill.featurizer"])
        self.vocab = SkillVocab.from_dict(json.loads(meta["evoskill.vocab"]))
        self.net_config: dict[str, Any] = json.loads(meta["evoskill.net_config"])
        self.dynamics = DynamicsWeights.from_json(meta[DYNAMICS_KEY]) if DYNAMICS_KEY in meta else None
        self.malformed: str | None = None  # what is wrong with its metadata (`unfit` refuses it)
        try:
            self.demonstrated = demonstrated_actions(meta.get(DEMONSTRATED_KEY, "[]"))
        except ValueError as exc:
            self.demonstrated, self.malformed = (), str(exc)
        if featurizer is None:
            featurizer = text_encoder_from_spec(self.featurizer_spec, cache_dir=cache_dir)
        elif featurizer.spec != self.featurizer_spec:
            raise ValueError(f"{self.path} was trained on {self.featurizer_spec} features, not {featurizer.spec}")
        self.featurizer = featurizer

    def run(self, inputs: Inputs) -> tuple[np.ndarray, np.ndarray]:
        logits, values = self.session.run(list(OUTPUTS), inputs._asdict())  # field names = the graph's inputs
        return logits, values


# A state and candidates every policy can read: the sanity check's input.
_PROBE_STATES = [("Your task is to find the coin.", "You are in the kitchen. To the north you see a door.")]
_PROBE_CANDIDATES = [[("move north", "move north"), ("look around", "look around"), ("take coin", "take X")]]


def unfit(policy: OnnxPolicy) -> str | None:
    """Why `policy` must not serve: a weight that is not finite, or priors and values that are not finite
    numbers (priors summing to 1) on a probe state; None when it may."""
    for weight in onnx.load(str(policy.path)).graph.initializer:
        values = numpy_helper.to_array(weight)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            return f"weight {weight.name} holds {int((~np.isfinite(values)).sum())} non-finite values"
    if policy.malformed is not None:
        return policy.malformed
    if policy.dynamics is not None and not policy.dynamics.finite():
        return "its dynamics model's weights are not all finite"
    priors, values = policy.score(_PROBE_STATES, _PROBE_CANDIDATES)
    if not (np.isfinite(values).all() and all(np.isfinite(p).all() and abs(float(p.sum()) - 1) < 1e-3
                                             for p in priors)):
        return f"its outputs on a probe state are not finite priors and values ({priors}, {values})"
    return None


class TorchPolicy(_Scorer):
    """The live torch network behind the same interface."""

    def __init__(self, net: PolicyValueNet | ReaderNet, vocab: SkillVocab, featurizer: TextEncoder) -> None:
        self.net = net
        self.vocab = vocab
        self.featurizer = featurizer

    @torch.no_grad()
    def run(self, inputs: Inputs) -> tuple[np.ndarray, np.ndarray]:
        was_training = self.net.training
        self.net.eval()
        logits, values = self.net(*(torch.from_numpy(x) for x in inputs))
        self.net.train(was_training)
        return logits.numpy(), values.numpy()
