"""Generates the Python SDK's stubs (clients/python/src/llm_platform/v1/) from protos/llm/v1/.

The same generator as the server's own stubs (grpcio-tools, pinned in constraints.txt), into the SDK's
package: imports of `llm.v1` become `llm_platform.v1`, so an installed SDK claims no top-level `llm`
package. Both register identical descriptors, so a process may import the two. Part of `make sdks`;
run: `python -m prebuild.sdk_python [OUT_ROOT]` (OUT_ROOT replaces the repository root, for the
regeneration check).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from prebuild.protos import ROOT, generate

PACKAGE = Path("clients/python/src/llm_platform/v1")
_IMPORT = re.compile(r"^from llm\.v1 import ", re.MULTILINE)


def generate_sdk(root: Path = ROOT) -> list[Path]:
    out = root / PACKAGE
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        written = []
        for src in sorted((Path(tmp) / "llm" / "v1").iterdir()):
            if src.suffix not in (".py", ".pyi"):
                continue
            target = out / src.name
            target.write_text(_IMPORT.sub("from llm_platform.v1 import ", src.read_text()))
            written.append(target)
    return written


if __name__ == "__main__":
    files = generate_sdk(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    print(f"generated {len(files)} files into {PACKAGE}", file=sys.stderr)
