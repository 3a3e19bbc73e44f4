"""Serving θ in the planner: the PolicyFn adapter over an exported policy (either encoder), and the policy
store's versions, fetched as bytes from a learner (a stand-in answering GetPolicy and ListPolicies from a registry)."""

from __future__ import annotations

from pathlib import Path

import grpc
import numpy as np
import pytest

from evoskill.core.errors import InvalidInput, NotFound
from evoskill.core.learn import Learner, OnnxPolicy, TrainConfig, episode_examples
from evoskill.envs.base import heuristic_template
from evoskill.learner.registry import PolicyRegistry
from evoskill.learner.v1 import learner_pb2
from evoskill.planner.policy import OnnxPolicyFn, PolicyStore
from evoskill.platform.config import LearnerSettings, Settings
from tests.rpc_status import RpcStatus
from tests.unit.test_learn_data import take_task_episode
from tests.unit.test_learn_export import encoder_featurizer

BATCH = [
    ("Your task is to eat the apple.", "You see an apple and a knife.", ["take apple", "take knife", "go north"],
     ["take X", "take X", "go north"]),
    ("Your task is to eat the coin.", "You carry the coin.", ["eat coin"], ["eat X"]),
    ("Find the key.", "", ["open door", "unlock chest with key", "look", "go west"],
     ["open X", "unlock X with Y", "look", "go west"]),
]


def trained_learner(seed: int = 0, encoder: str = "mlp", **settings: object) -> Learner:
    learner = Learner(encoder_featurizer(encoder), LearnerSettings(lr=3e-3, **settings),
                      TrainConfig(hidden=16, skill_dim=8, max_skills=64, seed=seed, width=16))
    rng = np.random.default_rng(seed)
    batch = learner.collate([ex for i in range(4) for ex in episode_examples(take_task_episode(f"e{i}", rng))])
    for _ in range(3):
        learner.update(batch)
    return learner


@pytest.fixture(scope="module", params=["mlp", "reader"])
def policy_fn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> OnnxPolicyFn:
    path = trained_learner(encoder=request.param).export(tmp_path_factory.mktemp("policies"))
    return OnnxPolicyFn(OnnxPolicy(path), "v000001")


def test_theta_is_served_reading_what_it_was_trained_to_read(tmp_path: Path) -> None:
    plain = OnnxPolicyFn(OnnxPolicy(trained_learner().export(tmp_path / "plain")), "v000001")
    assert (plain.room_marks, plain.recent_actions, plain.scored_marks) == (False, 0, False)
    path = trained_learner(room_marks=True, recent_actions=3, scored_marks=True).export(tmp_path / "marked")
    marked = OnnxPolicyFn(OnnxPolicy(path), "v000002")
    assert (marked.room_marks, marked.recent_actions, marked.scored_marks) == (True, 3, True)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def test_logits_per_state_give_the_scorers_priors(policy_fn: OnnxPolicyFn) -> None:
    logits, values = policy_fn(BATCH)
    assert [len(row) for row in logits] == [3, 1, 4] and values.shape == (3,)
    priors, ref_values = policy_fn.policy.score([(g, o) for g, o, _, _ in BATCH],
                                                [list(zip(a, t, strict=True)) for _, _, a, t in BATCH])
    for row, p in zip(logits, priors, strict=True):
        np.testing.assert_allclose(softmax(row), p, atol=1e-6)
    np.testing.assert_allclose(values, ref_values, atol=1e-6)


def test_one_batched_call_equals_one_call_per_state(policy_fn: OnnxPolicyFn) -> None:
    logits, values = policy_fn(BATCH)
    for i, state in enumerate(BATCH):  # padding to the widest state must not change any answer
        alone, value = policy_fn([state])
        np.testing.assert_allclose(alone[0], logits[i], atol=1e-5)
        assert value[0] == pytest.approx(values[i], abs=1e-5)


def test_missing_templates_fall_back_to_the_heuristic_ones(policy_fn: OnnxPolicyFn) -> None:
    goal, obs, actions, _ = BATCH[0]
    heuristic = [heuristic_template(a) for a in actions]
    assert all(policy_fn.policy.vocab.get(t) for t in heuristic)  # skills θ knows, so templates matter
    without, _ = policy_fn([(goal, obs, actions, [])])
    explicit, _ = policy_fn([(goal, obs, actions, heuristic)])
    other, _ = policy_fn([(goal, obs, actions, ["eat X"] * len(actions))])
    np.testing.assert_allclose(without[0], explicit[0])
    assert not np.allclose(without[0], other[0])
    assert policy_fn([]) == ([], pytest.approx(np.zeros(0)))


class RegistryLearner:
    """The learner's GetPolicy and ListPolicies over a registry folder; `down` makes it unreachable."""

    def __init__(self, registry: PolicyRegistry) -> None:
        self.registry = registry
        self.fetched: list[str] = []
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise RpcStatus(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")

    def GetPolicy(self, request: learner_pb2.GetPolicyRequest) -> learner_pb2.PolicyInfo:
        self._check()
        try:
            entry = self.registry.get(request.version)
        except NotFound as exc:
            raise RpcStatus(grpc.StatusCode.NOT_FOUND, str(exc)) from None
        self.fetched.append(entry.version)
        return learner_pb2.PolicyInfo(version=entry.version, onnx_model=self.registry.path(entry).read_bytes())

    def ListPolicies(self, request: learner_pb2.ListPoliciesRequest) -> learner_pb2.ListPoliciesReply:
        self._check()
        record = self.registry.serving()
        return learner_pb2.ListPoliciesReply(serving_version=record.version if record else "")


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> PolicyRegistry:
    """A learner's registry holding v1 and v2 (on the learner's disk, never the planner's)."""
    registry = PolicyRegistry(tmp_path_factory.mktemp("learner") / "policies")
    for seed in (1, 2):
        learner = trained_learner(seed)
        learner.version = seed - 1
        registry.add(seed, learner.export(registry.directory), {"loss": float(seed)})
    return registry


def test_store_fetches_versions_as_bytes_and_keeps_them(registry: PolicyRegistry, tmp_path: Path) -> None:
    learner = RegistryLearner(registry)
    store = PolicyStore(Settings(state_dir=tmp_path), learner=learner)
    latest = store.get("")
    assert latest.version == "v000002" and store.latest == "v000002"
    assert store.get("1").version == "v000001" and store.get("v000001") is store.get("1")  # cached
    assert learner.fetched == ["v000002", "v000001"]
    first, second = store.get("v000001")(BATCH[:1])[0][0], latest(BATCH[:1])[0][0]
    assert not np.allclose(first, second)  # two different θ, really
    assert sorted(p.name for p in (tmp_path / "planner" / "policies").iterdir()) == ["v000001.onnx", "v000002.onnx"]
    with pytest.raises(NotFound, match="not published"):
        store.get("v000009")
    with pytest.raises(InvalidInput, match="not of the form"):
        store.get("latest")


def test_kept_versions_serve_while_the_learner_is_down(registry: PolicyRegistry, tmp_path: Path) -> None:
    learner = RegistryLearner(registry)
    PolicyStore(Settings(state_dir=tmp_path), learner=learner).get("v000001")
    learner.down = True
    restarted = PolicyStore(Settings(state_dir=tmp_path), learner=learner)  # same planner disk, new process
    assert restarted.get("v000001").version == "v000001"  # a version is immutable: the kept bytes serve
    with pytest.raises(RpcStatus) as raised:
        restarted.get("v000002")  # never fetched: the learner's answer, for the caller to retry
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_announcement_moves_latest_forward_only(registry: PolicyRegistry, tmp_path: Path) -> None:
    store = PolicyStore(Settings(state_dir=tmp_path), learner=RegistryLearner(registry))
    assert store.latest == ""
    assert store.published("v000002") and store.latest == "v000002"
    assert not store.published("v000001")  # an old announcement read from the stream's history
    assert not store.published("v000002")
    assert store.get("").version == "v000002"
