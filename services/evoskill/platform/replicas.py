"""Services that run as several replicas: which replica a call goes to.

New work (an episode, a session) may go to any replica: in turn over `<service>_endpoint.replicas` (the
embedded stack's `--replicas`), else to `host:port`, which on Kubernetes is a headless Service whose DNS name
lists every ready pod, spread per call by gRPC's round_robin policy (`rpc.service_config`).

What a replica owns is named by that replica's own address: a sandbox session id is `<owner address>/<id>`,
and every call on the session dials the owner directly (`ReplicaStub`), whichever replica of the caller makes
it and whichever connection it used before. An id naming a replica the service does not have is NOT_FOUND,
one naming a replica that cannot be reached UNAVAILABLE, each message naming the replica.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from cachetools import LRUCache

from evoskill.core.errors import NotFound, Unavailable
from evoskill.platform.config import ServiceEndpoint

_turns: dict[tuple[str, ...], Iterator[int]] = {}


def pick(endpoint: ServiceEndpoint) -> str:
    """The replica for the next piece of new work: each in turn, shared by every caller in this process."""
    addresses = tuple(endpoint.addresses)
    turn = _turns.setdefault(addresses, itertools.count())
    return addresses[next(turn) % len(addresses)]


def owned_id(owner: str, local_id: str) -> str:
    """The id of something `owner` (a replica's advertised address) holds."""
    return f"{owner}/{local_id}"


def owner_of(owned: str) -> str:
    """The address of the replica that holds `owned` (an id made by `owned_id`); NotFound for an id no replica
    could have made."""
    owner, sep, local_id = owned.rpartition("/")
    if not sep or not owner or not local_id:
        raise NotFound(f"no session {owned!r}: a session id names the replica that holds it, "
                       "<replica address>/<id>")
    return owner


def is_replica(endpoint: ServiceEndpoint, address: str) -> bool:
    """Whether `address` is one of the service's replicas: listed, or (no list) one of the addresses its host
    name resolves to, on its port. Callers dial only these, never an arbitrary address taken from a request."""
    if address in endpoint.addresses:
        return True
    if endpoint.replicas:
        return False  # a fixed list is the whole set
    host, _, port = address.rpartition(":")
    if port != str(endpoint.port):
        return False
    try:
        resolved = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return host.strip("[]") in {str(info[4][0]) for info in resolved}


class ReplicaStub:
    """A blocking stub over a service's replicas: each call goes to the next replica in turn, except, for a
    service whose sessions each live on one replica (`owns_sessions`: the sandbox), a request with a
    `session_id`, which goes to the replica that id names. Channels are kept per address (the least recently
    used dropped beyond `keep`)."""

    def __init__(self, service: str, endpoint: ServiceEndpoint, stub: Callable[[Any], Any],
                 connect: Callable[[str], Any], owns_sessions: bool = False, keep: int = 64) -> None:
        self.service, self.endpoint, self.owns_sessions = service, endpoint, owns_sessions
        self._stub, self._connect = stub, connect
        # Beyond `keep`, the least recently used goes, not closed: a call in flight may still hold it; gRPC
        # closes it with its last reference.
        self._stubs: LRUCache[str, Any] = LRUCache(keep)
        self._lock = threading.Lock()

    def at(self, address: str, session_id: str = "") -> Any:
        """The stub of the replica at `address`; NotFound when the service has no such replica."""
        with self._lock:
            if address in self._stubs:
                return self._stubs[address]  # the most recently used now
        if not is_replica(self.endpoint, address):  # outside the lock: it may ask DNS
            raise NotFound(f"session {session_id!r} names {self.service} replica {address}, which is not one of "
                           f"the {self.service} replicas ({', '.join(self.endpoint.addresses)})")
        with self._lock:
            if address not in self._stubs:
                self._stubs[address] = self._stub(self._connect(address))
            return self._stubs[address]

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def call(request: Any, *args: Any, **kwargs: Any) -> Any:
            session_id = getattr(request, "session_id", "") if self.owns_sessions else ""
            if not session_id:
                return getattr(self.at(pick(self.endpoint)), method)(request, *args, **kwargs)
            owner = owner_of(session_id)
            try:
                return getattr(self.at(owner, session_id), method)(request, *args, **kwargs)
            except grpc.RpcError as exc:
                if exc.code() is not grpc.StatusCode.UNAVAILABLE:  # type: ignore[attr-defined]
                    raise
                raise Unavailable(f"{self.service} replica {owner}, which holds session {session_id}, is "
                                  f"unavailable: {exc.details()}") from exc  # type: ignore[attr-defined]

        return call


__all__ = ["ReplicaStub", "is_replica", "owned_id", "owner_of", "pick"]
