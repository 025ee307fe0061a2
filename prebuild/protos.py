"""Generates the Python gRPC code for `protos/llm/v1/*.proto` into `llm/v1/` at the repository root.

The generated package is git-ignored and never edited by hand; `make` regenerates it when a proto
changes. Run: `python -m prebuild.protos`.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from google.rpc import status_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"


def generate(out_dir: Path = ROOT) -> list[Path]:
    protos = sorted(PROTO_ROOT.glob("llm/v1/*.proto"))
    well_known = str(resources.files("grpc_tools") / "_proto")
    google_rpc = str(Path(status_pb2.__file__).parents[2])  # google/rpc/status.proto
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"-I{google_rpc}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *(str(p.relative_to(PROTO_ROOT)) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    for pkg in (out_dir / "llm", out_dir / "llm" / "v1"):
        (pkg / "__init__.py").touch()
    return protos


if __name__ == "__main__":
    names = generate()
    print(f"generated Python code for {len(names)} protos into llm/v1/", file=sys.stderr)
