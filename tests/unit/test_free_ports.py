"""Ports chosen for a stack's servers lie below the OS's ephemeral range, where nothing that binds port 0 or
connects out can take one between its choice and its server's bind."""

from __future__ import annotations

import socket

import pytest

from evoskill.stack import supervisor
from evoskill.stack.supervisor import PORTS_FROM, ephemeral_ports, free_ports


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low, high = ephemeral_ports()
    assert 0 < low <= high
    ports = free_ports(12)
    assert len(set(ports)) == 12
    if low > PORTS_FROM + 12:
        assert all(PORTS_FROM <= p < low for p in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    busy, spare = free_ports(2)
    monkeypatch.setattr(supervisor.random, "sample", lambda population, k: [busy, spare])  # the busy one first
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", busy))
        taken.listen()
        assert free_ports(1) == [spare]
