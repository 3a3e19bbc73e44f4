"""`bench reader`: a learner's weights exported by this code against the file it published, on a library's
states: the same θ, so the same outputs; `bench cloning-step`: the reader's training and serving kernels give the
same logits and gradients; the other encoder refused by name by both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evoskill.bench.reader import library_states, run_cloning_step_bench, run_reader_bench
from evoskill.core.learn import HashingFeaturizer, Learner, TokenFeaturizer, TrainConfig, episode_examples
from evoskill.library.jsonl import write_jsonl
from evoskill.platform.config import LearnerSettings
from tests.unit.test_learn_data import take_task_episode


def trained(tmp_path: Path, reader: bool) -> tuple[Path, Path, Path]:
    featurizer = TokenFeaturizer("hash", dim=16, buckets=256) if reader else HashingFeaturizer(32)
    learner = Learner(featurizer, LearnerSettings(lr=3e-3), TrainConfig(hidden=32, skill_dim=8, max_skills=64,
                                                                          width=16))
    rng = np.random.default_rng(0)
    episodes = [take_task_episode(f"e{i}", rng) for i in range(4)]
    for episode in episodes:  # what a library record needs besides the steps
        episode.env_spec, episode.fold, episode.agent = "twx:coin", "train", "demo"
    batch = learner.collate([ex for episode in episodes for ex in episode_examples(episode)])
    for _ in range(3):
        learner.update(batch)
    policy = learner.export(tmp_path / "policies")
    weights = learner.save(tmp_path / "weights" / "v000001.pt")
    library = tmp_path / "library.jsonl"
    with library.open("w") as out:
        write_jsonl(episodes, out)
    return weights, policy, library


def test_the_same_weights_give_the_same_outputs_and_every_state_is_timed(tmp_path: Path) -> None:
    weights, policy, library = trained(tmp_path, reader=True)
    assert len(library_states(library, 100)) == 8  # 4 episodes of 2 steps
    result = run_reader_bench(tmp_path / "bench.json", weights, policy, library, states=3, repeats=1)
    assert result["states"] == 3 and len(result["rows"]) == 3
    assert result["max_difference"] < 1e-4
    assert result["current_ms_per_state"] > 0 and result["ratio"] > 0
    assert result["features_agree"] and result["features_ratio"] > 0  # the baseline's features, read at once
    assert (tmp_path / "bench.json").exists()


def test_weights_of_the_mlp_encoder_are_refused_by_name(tmp_path: Path) -> None:
    weights, policy, library = trained(tmp_path, reader=False)
    with pytest.raises(ValueError, match="encoder is 'mlp'"):
        run_reader_bench(None, weights, policy, library, states=2, repeats=1)


def test_the_cloning_step_with_serving_kernels_gives_the_same_logits_and_gradients(tmp_path: Path) -> None:
    _, _, library = trained(tmp_path, reader=True)
    result = run_cloning_step_bench(tmp_path / "step.json", library, batches=2, repeats=1)
    assert result["max_logit_difference"] < 1e-4 and result["max_gradient_difference"] < 1e-4
    assert result["train_kernels_ms_per_step"] > 0 and result["serve_kernels_ms_per_step"] > 0
    assert result["candidates_mean"] > 0 and (tmp_path / "step.json").exists()


def test_the_cloning_step_of_the_mlp_encoder_is_refused_by_name(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, library = trained(tmp_path, reader=False)
    monkeypatch.setenv("EVOSKILL_LEARNER__ENCODER", "mlp")
    with pytest.raises(ValueError, match="encoder is 'mlp'"):
        run_cloning_step_bench(None, library, batches=1, repeats=1)
