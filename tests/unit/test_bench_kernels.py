"""`evoskill bench kernels`: the learner's cloning in fresh processes gives the same θ twice on one machine, and
each row says which kernels torch chose (held to AVX2 where asked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoskill.bench import kernels
from evoskill.library.generate import generate
from evoskill.library.jsonl import write_jsonl
from evoskill.platform.provenance import cpu_record

COOKING = ("twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,"
           "limitInventorySize=0")


def test_cloning_twice_gives_the_same_theta_and_the_report_names_the_cpu(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    library = tmp_path / "library.jsonl"
    with library.open("w") as out:
        write_jsonl(generate(COOKING, "train", range(3, 5), seen=False), out)
    monkeypatch.setattr(kernels, "PATHS", (kernels.PATHS[0], kernels.PATHS[1], kernels.PATHS[-1]))

    result = kernels.run_kernels_bench(tmp_path / "kernels.json", library, episodes=2, steps=3, seed=3)

    first, again, avx2 = result["rows"]
    assert result["repeatable"] and first["digest"] == again["digest"] and first["loss"] == again["loss"]
    assert len(first["digest"]) == 16 and first["torch_threads"] == again["torch_threads"] >= 1
    if cpu_record()["vector_isa"] in ("avx2", "avx512"):
        assert avx2["aten_kernels"] == "AVX2" and avx2["environment"] == kernels.AVX2
    report = json.loads((tmp_path / "kernels.json").read_text())
    assert report["run"]["cpu"]["vector_isa"] and set(report["same_theta_as_this_machine"]) == {avx2["path"]}
