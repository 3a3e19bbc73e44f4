"""The committed stubs are exactly what `make protos` generates from protos/."""

from __future__ import annotations

from pathlib import Path

from evoskill.platform.protogen import ROOT, generate


def test_generated_stubs_match_the_protos(tmp_path: Path) -> None:
    generate(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*_pb2*.py*"))
    assert generated, "no stubs generated"
    stale = [str(rel) for rel in generated if (ROOT / "services" / rel).read_bytes() != (tmp_path / rel).read_bytes()]
    assert not stale, f"stubs out of date, run `make protos`: {stale}"
