"""Generate the Python stubs from protos/ (the one schema source).

The stubs are committed so a fresh install needs no code generation; `make protos` regenerates them and
`tests/unit/test_protos_in_sync.py` fails when they drift. Each area's stubs land beside its service:
`protos/evoskill/sandbox/v1/sandbox.proto` -> `services/evoskill/sandbox/v1/sandbox_pb2.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[3]
PROTO_ROOT = ROOT / "protos"


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Run grpcio-tools over every proto into out_dir (an import root) and add the package markers."""
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(PROTO_ROOT)) for p in proto_files()]
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for rel in files:
        pkg = (out_dir / rel).parent
        while pkg != out_dir:
            (pkg / "__init__.py").touch(exist_ok=True)
            pkg = pkg.parent


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "services"
    generate(out)


if __name__ == "__main__":
    main()
