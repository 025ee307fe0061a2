"""The layering of pyproject.toml's import-linter contracts, and what it buys: control and billing load
without each other, and the store kernel migrates a store without loading either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def loaded_after(code: str) -> set[str]:
    """The top-level project packages a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return set(json.loads(out.splitlines()[-1])) & {
        "datastore",
        "control",
        "billing",
        "lifecycle",
        "frontend",
    }


def test_the_import_contracts_are_kept() -> None:
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("package", "modules"),
    [
        ("billing", ("aggregator", "errors", "ledger", "models", "seal", "totals", "usage")),
        ("control", ("attempts", "cancel", "generations", "models", "states", "sweeper", "termination")),
    ],
)
def test_each_peer_loads_without_the_other(package: str, modules: tuple[str, ...]) -> None:
    imports = "\n".join(f"import {package}.{m}" for m in modules)
    assert loaded_after(imports) == {"datastore", package}


def test_the_kernel_migrates_a_store_without_loading_control_or_billing(tmp_path: Path) -> None:
    code = (
        "from datastore.migrations import current, heads\n"
        "from datastore.store import open_store\n"
        f"store = open_store('sqlite:///{tmp_path / 'store.sqlite'}')\n"
        "assert current(store.engine) == heads()[0]\n"
    )
    assert loaded_after(code) == {"datastore"}
