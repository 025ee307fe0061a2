"""Building the engine's kernels: one build per key, reused; a new key builds again; the portable
paths (scalar, AVX2) pass the same kernel tests as this machine's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prebuild import kernels as build

ROOT = Path(__file__).resolve().parents[2]


def test_an_unchanged_machine_reuses_its_build() -> None:
    first = build.ensure_kernels()
    stamp = first.stat().st_mtime_ns
    assert build.ensure_kernels() == first and first.stat().st_mtime_ns == stamp
    assert first.parent.name == build.build_key()


def test_the_key_follows_the_instruction_set_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    native = build.build_key()
    monkeypatch.setenv("LLM_KERNELS_MARCH", "x86-64-v2")
    assert build.build_key() != native


def test_the_key_is_found_again_without_torch_while_its_install_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = build.build_key(tmp_path)
    (record,) = tmp_path.glob(".torch-*.json")
    asked: list[str] = []

    def another_torch() -> tuple[str, Path, Path, bool]:
        asked.append("torch")
        return "9.9.9", tmp_path, tmp_path, True

    monkeypatch.setattr(build, "_torch_paths", another_torch)
    assert build.build_key(tmp_path) == key  # from the record: torch is not asked
    assert asked == []
    raw = json.loads(record.read_text())
    raw["install"][0][1] += 1  # another inode: a record of another install
    record.write_text(json.dumps(raw))
    assert build.build_key(tmp_path) != key  # torch is asked, and answers another version
    assert asked == ["torch"]


def test_a_compile_error_is_reported_with_the_compilers_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = tmp_path / "csrc"
    sources.mkdir()
    (sources / "broken.cpp").write_text("int main() { return undefined_name; }\n")
    monkeypatch.setattr(build, "SOURCES", sources)
    with pytest.raises(build.KernelBuildError, match="undefined_name"):
        build.ensure_kernels(tmp_path / "kernels")
    assert not list((tmp_path / "kernels").glob("*/libllm_kernels.so"))


@pytest.mark.parametrize("march", ["x86-64-v2", "x86-64-v3"])
def test_every_other_code_path_passes_the_kernel_tests(march: str) -> None:
    """tests/engine/test_kernels.py in a process of its own, against a build for another
    instruction set: x86-64-v2 runs the scalar path, x86-64-v3 the AVX2 one (where this machine's
    own build is not already that)."""
    from tests.engine.test_kernels import MARCH_ISA, native_isa

    if MARCH_ISA[march] == native_isa():
        pytest.skip(f"this machine's own build already runs the {native_isa()} path")
    if march == "x86-64-v3" and native_isa() == "scalar":
        pytest.skip("this CPU cannot run AVX2 code")
    env = {**os.environ, "LLM_KERNELS_MARCH": march}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/engine/test_kernels.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
