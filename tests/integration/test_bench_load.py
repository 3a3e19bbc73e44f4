"""`evoskill bench pipeline --load`'s measurement on a real embedded stack: concurrent episodes through every
service, then the counts of every store reconciled (bench/load.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoskill.bench.load import measure_load
from evoskill.platform.config import MemorySettings
from tests.conftest import make_settings

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)
async def test_concurrent_episodes_reconcile_in_every_store(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state", memory=MemorySettings(featurizer="hash"))
    result = await measure_load(settings, episodes=4, concurrency=2, env="twx:coin", agent="random", simulations=1,
                                max_steps=4, max_seconds=600, say=lambda line: None)
    counts = result["counts"]
    assert result["reconciled"], result["checks"]
    assert counts["episodes_finished"] == counts["episodes_in_replay"] == counts["episode_completed_events"] == 4
    steps = counts["steps_of_finished_episodes"]
    assert 4 <= steps <= 16
    assert counts["step_executed_events"] == counts["reward_scored_events"] == counts["experiences_stored"] == steps
    assert result["episodes_played"] == 4 and result["first_step_p50_s"] > 0
    assert 0 < result["step_latency_p50_s"] <= result["step_latency_p99_s"]
