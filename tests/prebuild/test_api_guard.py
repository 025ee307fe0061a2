"""The API guard (`make api-check`): buf breaking against the released descriptor set api/llm-v1.binpb
fails on a removed field and on a renumbered enum value, and passes on an additive change; buf lint
passes on the protos as they are."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / "clients" / "typescript" / "node_modules" / ".bin" / "buf"
RELEASED = ROOT / "api" / "llm-v1.binpb"
GENERATIONS = Path("protos/llm/v1/generations.proto")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the buf workspace (config, our protos, vendored google.rpc) to edit."""
    assert BUF.exists(), f"{BUF} is missing: run `make sdk-deps` (make test does)"
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    shutil.copytree(ROOT / "protos", tmp_path / "protos")
    shutil.copytree(ROOT / "third_party", tmp_path / "third_party")
    return tmp_path


def breaking(workspace: Path) -> tuple[int, list[dict[str, str]]]:
    """buf breaking's exit code and its findings."""
    proc = subprocess.run(
        [str(BUF), "breaking", "--against", str(RELEASED), "--error-format", "json"],
        cwd=workspace,
        capture_output=True,
        text=True,
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def edit(workspace: Path, pattern: str, replacement: str) -> None:
    path = workspace / GENERATIONS
    text, n = re.subn(pattern, replacement, path.read_text(), flags=re.MULTILINE)
    assert n == 1, f"{pattern!r} matched {n} times"
    path.write_text(text)


def test_the_protos_as_they_are_pass_lint_and_breaking(workspace: Path) -> None:
    lint = subprocess.run([str(BUF), "lint"], cwd=workspace, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert breaking(workspace) == (0, [])


def test_a_removed_field_is_a_breaking_change(workspace: Path) -> None:
    edit(workspace, r"^\s*uint64 epoch = 6;.*\n", "")  # Generation.epoch
    code, findings = breaking(workspace)
    assert code != 0
    assert [(f["type"], f["path"]) for f in findings] == [("FIELD_NO_DELETE", str(GENERATIONS))]
    assert '"epoch"' in findings[0]["message"]


def test_a_renumbered_enum_value_is_a_breaking_change(workspace: Path) -> None:
    edit(workspace, r"^(\s*)RUNNING = 2;", r"\1RUNNING = 9;")  # Generation.State.RUNNING
    code, findings = breaking(workspace)
    assert code != 0
    assert {f["type"] for f in findings} == {"ENUM_VALUE_NO_DELETE"}  # value 2 is gone


def test_an_added_field_is_not_a_breaking_change(workspace: Path) -> None:
    edit(
        workspace,
        r"^(\s*)uint64 predicted_wait_ms = 10;",
        r"\1uint64 predicted_wait_ms = 10;\n\1string note = 11;",
    )
    assert breaking(workspace) == (0, [])
