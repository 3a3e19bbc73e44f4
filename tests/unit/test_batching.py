"""The Gatherer behind the memory's batch consumer: concurrent adds share one write, and its outcome."""

from __future__ import annotations

import asyncio

import pytest

from evoskill.platform.batching import Gatherer


class Writes:
    def __init__(self, fail: int = 0) -> None:
        self.batches: list[list[int]] = []
        self.fail = fail  # the first `fail` writes raise

    async def __call__(self, items: list[int]) -> None:
        await asyncio.sleep(0)
        if self.fail:
            self.fail -= 1
            raise ConnectionError("qdrant went away")
        self.batches.append(items)


async def test_the_handlers_of_one_pull_share_one_write() -> None:
    writes, sizes = Writes(), []
    gatherer = Gatherer(writes, size=16, wait_s=0.05, on_written=sizes.append)
    await asyncio.gather(*(gatherer.add(i) for i in range(5)))
    assert writes.batches == [[0, 1, 2, 3, 4]] and sizes == [5]


async def test_a_full_batch_is_written_without_waiting() -> None:
    writes = Writes()
    gatherer = Gatherer(writes, size=3, wait_s=3600)  # only the size can end these batches
    await asyncio.wait_for(asyncio.gather(*(gatherer.add(i) for i in range(6))), timeout=30)
    assert writes.batches == [[0, 1, 2], [3, 4, 5]]


async def test_a_lone_item_is_written_after_the_wait() -> None:
    writes = Writes()
    await Gatherer(writes, size=16, wait_s=0.01).add(7)
    assert writes.batches == [[7]]


async def test_a_failed_write_fails_every_caller_of_its_batch_and_the_next_batch_goes_on() -> None:
    writes = Writes(fail=1)
    gatherer = Gatherer(writes, size=16, wait_s=0.01)
    outcomes = await asyncio.gather(*(gatherer.add(i) for i in range(3)), return_exceptions=True)
    assert [type(o) for o in outcomes] == [ConnectionError] * 3
    await gatherer.add(9)  # a redelivery, in a batch of its own
    assert writes.batches == [[9]]


async def test_a_cancelled_caller_leaves_its_item_in_the_write() -> None:
    writes = Writes()
    gatherer = Gatherer(writes, size=16, wait_s=0.05)
    waiting = asyncio.create_task(gatherer.add(1))
    other = asyncio.create_task(gatherer.add(2))
    await asyncio.sleep(0)
    waiting.cancel()
    await other
    assert writes.batches == [[1, 2]]
    with pytest.raises(asyncio.CancelledError):
        await waiting


@pytest.mark.parametrize(("size", "wait_s"), [(0, 0.1), (4, -1.0)])
def test_a_batch_needs_a_size_and_a_wait(size: int, wait_s: float) -> None:
    with pytest.raises(ValueError, match="size >= 1"):
        Gatherer(Writes(), size, wait_s)
