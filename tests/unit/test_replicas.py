"""Choosing a replica: new work in turn, a session's calls to the replica its id names, `--replicas` parsing.

The stubs here are recorders (the routing is pure logic); tests/integration/test_replicas.py runs the same
routing over two real sandbox and two real planner replicas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from typer.testing import CliRunner

from evoskill.cli import app
from evoskill.core.errors import InvalidInput, NotFound, Unavailable
from evoskill.platform.config import ServiceEndpoint
from evoskill.platform.replicas import ReplicaStub, is_replica, owned_id, owner_of, pick
from evoskill.sandbox.v1 import sandbox_pb2
from evoskill.stack.supervisor import parse_replicas

TWO = ServiceEndpoint(host="127.0.0.1", port=7001, replicas=["127.0.0.1:7001", "127.0.0.1:7002"])


class Refused(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "failed to connect to all addresses"


class Recorder:
    """A stub of the replica at `address`: records (address, method, session id) of each call."""

    def __init__(self, address: str, calls: list[tuple[str, str, str]], down: set[str]) -> None:
        self.address, self.calls, self.down = address, calls, down

    def __getattr__(self, method: str) -> Any:
        def call(request: Any) -> str:
            if self.address in self.down:
                raise Refused()
            self.calls.append((self.address, method, getattr(request, "session_id", "")))
            return self.address

        return call


def router(endpoint: ServiceEndpoint, owns_sessions: bool = True, down: frozenset[str] = frozenset()
           ) -> tuple[ReplicaStub, list[tuple[str, str, str]]]:
    calls: list[tuple[str, str, str]] = []
    return ReplicaStub("sandbox", endpoint, lambda address: Recorder(address, calls, set(down)),
                       lambda address: address, owns_sessions), calls


def test_new_work_goes_to_each_replica_in_turn() -> None:
    endpoint = ServiceEndpoint(port=7101, replicas=["127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"])
    assert [pick(endpoint) for _ in range(6)] == endpoint.replicas * 2
    single = ServiceEndpoint(host="sandbox.ns", port=50061)
    assert single.addresses == ["sandbox.ns:50061"] and pick(single) == "sandbox.ns:50061"


def test_a_session_id_names_its_owner() -> None:
    assert owner_of(owned_id("10.0.0.7:50061", "s3-ab12")) == "10.0.0.7:50061"
    assert owner_of(owned_id("[fd00::7]:50061", "s3-ab12")) == "[fd00::7]:50061"
    for bad in ("s3-ab12", "/s3", "10.0.0.7:50061/"):
        with pytest.raises(NotFound, match="names the replica"):
            owner_of(bad)


def test_advertised_address_is_the_pods_own() -> None:
    assert ServiceEndpoint(host="sandbox", port=50061, advertise_host="10.1.2.3").advertised == "10.1.2.3:50061"
    assert ServiceEndpoint(host="sandbox", port=50061, advertise_host="fd00::3").advertised == "[fd00::3]:50061"
    assert ServiceEndpoint(host="127.0.0.1", port=50061).advertised == "127.0.0.1:50061"


def test_replicas_are_the_listed_ones_or_what_the_host_name_resolves_to() -> None:
    assert is_replica(TWO, "127.0.0.1:7002") and not is_replica(TWO, "127.0.0.1:7003")
    by_name = ServiceEndpoint(host="localhost", port=7001)  # as a headless Service's name lists its pods
    assert is_replica(by_name, "127.0.0.1:7001")
    assert not is_replica(by_name, "127.0.0.1:7009")  # another port: not the service
    assert not is_replica(by_name, "192.0.2.1:7001")  # an address the name does not resolve to


def test_session_calls_go_to_their_owner_and_new_sessions_in_turn() -> None:
    stub, calls = router(TWO)
    created = [stub.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin")) for _ in range(2)]
    assert sorted(created) == TWO.replicas
    on_second = owned_id("127.0.0.1:7002", "s0-1")
    for _ in range(3):
        stub.Simulate(sandbox_pb2.SimulateRequest(session_id=on_second))
    stub.Step(sandbox_pb2.StepRequest(session_id=owned_id("127.0.0.1:7001", "s0-2"), action="look"))
    assert calls[2:] == [("127.0.0.1:7002", "Simulate", on_second)] * 3 + [
        ("127.0.0.1:7001", "Step", "127.0.0.1:7001/s0-2")]


def test_an_unknown_or_unreachable_owner_is_named() -> None:
    stub, calls = router(TWO, down=frozenset({"127.0.0.1:7002"}))
    with pytest.raises(NotFound, match=r"replica 10\.9\.9\.9:7001, which is not one of the sandbox replicas"):
        stub.Step(sandbox_pb2.StepRequest(session_id="10.9.9.9:7001/s0-1"))
    with pytest.raises(Unavailable, match=r"replica 127\.0\.0\.1:7002, which holds session .* is unavailable"):
        stub.Step(sandbox_pb2.StepRequest(session_id="127.0.0.1:7002/s0-1"))
    assert calls == []


def test_a_service_without_sessions_spreads_every_call() -> None:
    stub, calls = router(TWO, owns_sessions=False)
    for _ in range(4):
        stub.Step(sandbox_pb2.StepRequest(session_id="127.0.0.1:7002/s0-1"))  # a planner's Search names a sandbox
    assert sorted(address for address, _, _ in calls) == sorted(TWO.replicas * 2)


def test_parse_replicas() -> None:
    assert parse_replicas("sandbox=2, planner=3") == {"sandbox": 2, "planner": 3}
    for text, named in [("sandbox", "expected SERVICE=COUNT"), ("sandbox=two", "expected SERVICE=COUNT"),
                        ("sandbox=-1", "expected SERVICE=COUNT"), ("sandbox=0", "at least 1"),
                        ("sandbx=2", "unknown service 'sandbx'"), ("sandbox=2,sandbox=3", "names sandbox twice"),
                        ("learner=2", "learner runs once"), ("memory=2", "qdrant.url"), (",", "is empty")]:
        with pytest.raises(InvalidInput, match=named):
            parse_replicas(text)


def test_up_refuses_bad_replicas_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    result = CliRunner().invoke(app, ["up", "--replicas", "sandbox=2,planer=2"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "error: --replicas 'planer=2': unknown service 'planer'; expected one of sandbox, reward, memory, planner, "
        "learner, orchestrator"]
    assert not (tmp_path / "state").exists()  # nothing was started
