"""Serving θ in the planner: exported policies as search's `PolicyFn`, by version, hot-swapped.

- `OnnxPolicyFn` adapts `core.learn.export.OnnxPolicy` to the `PolicyFn` the search calls: one
  onnxruntime run per batch of leaves, raw logits over each state's candidates (search applies its own
  softmax) and V_θ. The inputs go through `make_inputs` with the exported vocabulary and featuriser,
  exactly as the learner built them; a state given without templates gets the heuristic ones, as the
  learner's data path does.
- `PolicyStore` resolves a version ("" = the serving one: the version promoted through the learner's
  SetServing, or the newest known while none was ever promoted) to a loaded policy. The one way a policy
  reaches a planner is its bytes from the learner's GetPolicy, so any number of planner replicas on any
  machines serve the same θ; the bytes are kept under the planner's own `<state_dir>/planner/policies/`
  (versions are immutable, so a kept version is never fetched again). Loaded versions are cached (the
  newest few and the serving one); `published()` moves "latest" forward on `policy.published` and
  `serving_changed()` re-reads the serving pointer on `policy.serving`, both without a restart; episodes
  already running keep the version they started with. While the learner is unreachable, what is loaded
  or kept keeps serving and anything else fails with the learner's UNAVAILABLE.
- A version that is not fit to serve (`core.learn.export.unfit`: a weight or an output that is not finite)
  is refused (`PolicyRefused`, FAILED_PRECONDITION naming why) and remembered: "latest" and the serving
  pointer never move to it, so what served before keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from evoskill.core.errors import FailedPrecondition, NotFound
from evoskill.envs.base import heuristic_template
from evoskill.events.v1 import events_pb2
from evoskill.learner.registry import feature_cache_dir, parse_version, version_name
from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc
from evoskill.platform.bus import Bus, Subjects
from evoskill.platform.config import Settings
from evoskill.platform.rpc import sync_channel

if TYPE_CHECKING:
    from evoskill.core.learn.export import OnnxPolicy

log = logging.getLogger(__name__)


class PolicyRefused(FailedPrecondition):
    """A published version that must not serve (its weights or outputs are not finite)."""


class OnnxPolicyFn:
    """`PolicyFn` over an exported policy: [(goal, observation, actions, templates)] -> (logits, values).
    `dynamics`: the dynamics model fitted beside θ, where its file has one (search's curiosity); `demonstrated`:
    the unlisted actions it was taught (core/search/demonstrated.py)."""

    def __init__(self, policy: OnnxPolicy, version: str) -> None:
        self.policy = policy
        self.version = version
        self.dynamics = policy.dynamics
        self.demonstrated = policy.demonstrated  # actions no environment listed that θ was taught to take
        self.room_marks = bool(policy.net_config.get("room_marks", False))  # θ reads the rooms candidates lead to
        self.recent_actions = int(policy.net_config.get("recent_actions", 0))  # and the state with its last actions
        self.scored_marks = bool(policy.net_config.get("scored_marks", False))  # and which kinds of action scored

    def __call__(
        self, batch: Sequence[tuple[str, str, Sequence[str], Sequence[str]]]
    ) -> tuple[list[np.ndarray], np.ndarray]:
        from evoskill.core.learn.data import make_inputs

        if not batch:
            return [], np.zeros(0)
        states = [(goal, observation) for goal, observation, _, _ in batch]
        candidates = [
            list(zip(actions, templates if len(templates) == len(actions) else [heuristic_template(a) for a in actions],
                     strict=True))
            for _, _, actions, templates in batch
        ]
        # vocab.get: a template the learner never saw is the unknown skill, scored from its text alone.
        inputs = make_inputs(self.policy.featurizer, self.policy.vocab.get, states, candidates)
        logits, values = self.policy.run(inputs)
        rows = [np.asarray(row[valid], dtype=np.float64) for row, valid in zip(logits, inputs.mask, strict=True)]
        return rows, np.asarray(values, dtype=np.float64).reshape(len(batch))


class PolicyStore:
    """Versions of θ for the planner: fetched once, cached, the newest tracked from `policy.published`."""

    def __init__(self, settings: Settings, *, keep: int = 4, learner: Any = None) -> None:
        self.settings = settings
        self.keep = keep
        self.cache_dir = settings.state_dir / "planner" / "policies"
        self._stub: Any = learner  # LearnerServiceStub; None = dialled on first use
        self._loaded: dict[int, OnnxPolicyFn] = {}
        self._latest = 0  # the newest version number known to be published
        self._serving: int | None = None  # the promoted version number; 0 = none promoted; None = not asked yet
        self._refused: dict[int, str] = {}  # version number -> why it may not serve
        self._lock = threading.Lock()  # loads happen in episode threads and in the bus consumer

    @property
    def latest(self) -> str:
        return version_name(self._latest) if self._latest else ""

    @property
    def serving(self) -> str:
        """The promoted version as last read ("" = none promoted, or not read yet)."""
        return version_name(self._serving) if self._serving else ""

    def _learner(self) -> Any:
        if self._stub is None:
            target = self.settings.endpoint("learner").target
            self._stub = learner_pb2_grpc.LearnerServiceStub(sync_channel(target, self.settings.grpc))
        return self._stub

    def _fetch(self, version: str) -> Path:
        """The ONNX file of `version` ("" = latest) on the planner's disk, fetched from the learner unless
        kept from before. NOT_FOUND -> NotFound; the learner's other errors pass through."""
        kept = self.cache_dir / f"{version}.onnx"
        if version and kept.exists():  # versions are immutable: a file already here is the same policy
            return kept
        try:
            info = self._learner().GetPolicy(learner_pb2.GetPolicyRequest(version=version))
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(exc.details() or f"policy {version!r} is not published") from None
            raise
        path = self.cache_dir / f"{info.version}.onnx"
        if not path.exists():
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_dir, suffix=".onnx.tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(info.onnx_model)
            os.replace(tmp, path)
        return path

    def _load(self, version: str) -> OnnxPolicyFn:
        from evoskill.core.learn.export import OnnxPolicy, unfit  # torch and onnx load only once θ is used

        policy = OnnxPolicy(self._fetch(version), cache_dir=feature_cache_dir(self.settings.state_dir))
        name = version_name(policy.version)
        problem = self._refused.get(policy.version) or unfit(policy)
        if problem is not None:
            self._refused[policy.version] = problem
            still = f"{self.serving or self.latest} still serves" if self._latest else "no policy serves yet"
            raise PolicyRefused(f"policy {name} is not fit to serve and is refused: {problem}; {still}")
        fn = OnnxPolicyFn(policy, name)
        with self._lock:
            self._loaded[policy.version] = fn
            self._latest = max(self._latest, policy.version)
            while len(self._loaded) > self.keep:  # drop the oldest versions, never the serving one
                del self._loaded[min(n for n in self._loaded if n != self._serving)]
        return fn

    def _read_serving(self) -> int:
        """The promoted version number (0 = none) from the learner."""
        reply = self._learner().ListPolicies(learner_pb2.ListPoliciesRequest())
        return parse_version(reply.serving_version) if reply.serving_version else 0

    def serving_changed(self) -> bool:
        """`policy.serving` was announced: re-read the pointer (the learner's registry is the truth, so an
        old announcement replayed from the stream's history changes nothing) and load what now serves.
        True if the serving version moved."""
        number = self._read_serving()
        if number and _unless_refused(lambda: self.get(version_name(number))) is None:  # loaded now, not later
            return False  # what served before goes on serving
        before, self._serving = self._serving, number
        return number != (before or 0)

    def follow_serving(self, bus: Bus, durable: str) -> None:
        """Consume `policy.serving` (a durable per planner replica: every replica must hear every change)."""

        @bus.consumer(Subjects.POLICY_SERVING, events_pb2.PolicyServing, durable=durable, per_replica=True)
        async def on_serving(event: events_pb2.PolicyServing) -> None:
            parse_version(event.version)  # malformed -> InvalidInput -> dead letter
            if await asyncio.to_thread(self.serving_changed):
                log.info("planner: now serving policy %s for an empty policy_version (%s)", self.serving,
                         event.reason)

    def get(self, version: str = "") -> OnnxPolicyFn:
        """The policy of `version` ("" = the serving one, else the newest published); NotFound if there is
        none such. Blocking (may fetch and load): call from a thread."""
        if not version and self._serving is None:
            self._serving = self._read_serving()
        number = parse_version(version) if version else (self._serving or self._latest)
        with self._lock:
            fn = self._loaded.get(number) if number else None
        return fn or self._load(version_name(number) if number else "")

    def published(self, version: str) -> bool:
        """`version` was announced: serve the newest as latest from now on. True if latest moved."""
        number = parse_version(version)
        if number <= self._latest:
            return False  # known already, or an old announcement (a new consumer reading the stream's history)
        before = self._latest
        # Ask for the newest rather than this one: catching up on a backlog then loads one policy, not each.
        newest = _unless_refused(lambda: self._load(""))
        if (newest is None or newest.version != version_name(number)) and self._latest < number:
            _unless_refused(lambda: self._load(version_name(number)))
        return self._latest > before


def _unless_refused(load: Callable[[], OnnxPolicyFn]) -> OnnxPolicyFn | None:
    """The loaded policy, or None (logged) where it is refused: an announcement of an unfit version is handled
    by not serving it, not retried."""
    try:
        return load()
    except PolicyRefused as exc:
        log.error("planner: %s", exc)
        return None
