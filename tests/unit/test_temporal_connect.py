"""Connecting to Temporal waits for a server that is still starting, and gives up with the server's own error."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from evoskill.platform import temporal
from evoskill.platform.config import Settings


async def test_connect_tries_again_until_the_server_answers_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    tries: list[str] = []
    answer_on = 3

    async def fake_connect(address: str, **_: object) -> Client:
        tries.append(address)
        if len(tries) < answer_on:
            raise RuntimeError(f"Failed client connect: connection refused (try {len(tries)})")
        return "client"  # type: ignore[return-value]

    monkeypatch.setattr(Client, "connect", staticmethod(fake_connect))
    settings = Settings()
    assert await temporal.connect(settings, attempts=5, wait_s=0) == "client"
    assert tries == [settings.temporal_address] * 3
    tries.clear()
    answer_on = 99
    with pytest.raises(RuntimeError, match=r"connection refused \(try 4\)"):  # the last error, not a RetryError
        await temporal.connect(settings, attempts=4, wait_s=0)
    assert len(tries) == 4
