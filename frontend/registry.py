"""The model versions this frontend serves, their aliases, and their pinned tokenizers.

An alias resolves to one immutable version at admission; "name@version" names one directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.artifact import Manifest, verify
from frontend.errors import invalid_argument
from frontend.tokenization import ModelTokenizer


@dataclass(slots=True, frozen=True)
class ServedVersion:
    manifest: Manifest
    artifact_dir: Path
    tokenizer: ModelTokenizer
    triton_model_name: str  # the worker-side model that serves this version
    eos_token_id: int

    @property
    def version_id(self) -> str:
        return self.manifest.version_id

    @property
    def context_length(self) -> int:
        return self.manifest.context_length


def triton_model_name(manifest: Manifest) -> str:
    return f"{manifest.name}--{manifest.version}"


def load_version(artifact_dir: Path) -> ServedVersion:
    """Verifies the artifact's checksums and loads its tokenizer and template."""
    manifest = verify(artifact_dir)
    config = json.loads((artifact_dir / "config.json").read_text())
    eos = config["eos_token_id"]
    eos_id = int(eos[0] if isinstance(eos, list) else eos)
    return ServedVersion(
        manifest=manifest,
        artifact_dir=artifact_dir,
        tokenizer=ModelTokenizer.from_artifact(artifact_dir, eos_id),
        triton_model_name=triton_model_name(manifest),
        eos_token_id=eos_id,
    )


class ModelRegistry:
    def __init__(self) -> None:
        self.versions: dict[str, ServedVersion] = {}
        self.aliases: dict[str, str] = {}  # alias -> version id

    def add(self, alias: str, version: ServedVersion) -> None:
        self.versions[version.version_id] = version
        self.aliases[alias] = version.version_id

    def resolve(self, model: str) -> ServedVersion:
        """An alias or "name@version" -> the pinned version; INVALID_ARGUMENT if unknown."""
        version_id = self.aliases.get(model, model)
        version = self.versions.get(version_id)
        if version is None:
            raise invalid_argument("UNKNOWN_MODEL", f"unknown model {model!r}", model=model[:128])
        return version
