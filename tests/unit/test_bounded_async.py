"""The test suite's own guard (tests/bounded_async.py): an async test that would run into pytest's timeout is
cancelled before it, so that its teardown runs and the next test finds nothing of it left running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest_plugins = ["pytester"]

HANGING = '''
import asyncio
import pytest

ended = []

@pytest.mark.timeout(31)  # cancelled after 1 s (31 - TEARDOWN_MARGIN_S)
async def test_hangs():
    try:
        await asyncio.sleep(60)
    finally:
        ended.append("teardown")

def test_next_finds_the_teardown_done():
    assert ended == ["teardown"]

@pytest.mark.timeout(31)
async def test_its_own_timeout_error_is_its_own():
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.sleep(60), 0.01)
'''


def test_a_hanging_async_test_fails_as_itself_and_its_teardown_runs(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.makeini("[pytest]\nasyncio_mode = auto\ntimeout = 300\nasyncio_default_test_loop_scope = session\n"
                     "asyncio_default_fixture_loop_scope = session\n")  # as this suite runs
    pytester.makepyfile(test_hanging=HANGING)
    result = pytester.runpytest_subprocess("-p", "tests.bounded_async", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_hangs ran past 1 s: cancelled, its teardown run*"])
