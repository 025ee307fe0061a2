"""Artifacts for the Admin tests: a new immutable version of the served model."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from artifacts.manifest import Manifest, derive_compatibility_key, derive_version, read_manifest, sha256_file


def variant_artifact(artifact_dir: Path, into: Path) -> tuple[Path, str]:
    """The same weights with another chat template: a new immutable version. Returns the folder
    and its manifest's sha256."""
    into.mkdir()
    for p in artifact_dir.iterdir():
        if p.name == "model.safetensors":
            (into / p.name).symlink_to(p)
        elif p.name != "manifest.json":
            shutil.copy2(p, into / p.name)
    (into / "chat_template.jinja").write_text((artifact_dir / "chat_template.jinja").read_text() + "{# v2 #}")
    old = read_manifest(artifact_dir)
    files = {name: sha256_file(into / name) for name in old.files}
    manifest = Manifest(
        name=old.name,
        version=derive_version(files),
        compatibility_key=derive_compatibility_key("LlamaForCausalLM", files),
        files=files,
        context_length=old.context_length,
        source=old.source,
    )
    (into / "manifest.json").write_text(manifest.to_json())
    return into, hashlib.sha256((into / "manifest.json").read_bytes()).hexdigest()
