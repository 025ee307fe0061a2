"""The immutable model artifact: a folder of files and a manifest holding each file's sha256.

    <artifact>/manifest.json        name, version, compatibility key, {file: sha256}
    <artifact>/config.json          Hugging Face Llama config
    <artifact>/model.safetensors    weights
    <artifact>/tokenizer.json       `tokenizers` byte-level BPE
    <artifact>/chat_template.jinja  the chat template, exactly as shipped

The version is derived from the file checksums, so equal content means an equal version. Loaders
call `verify()` and refuse to serve anything that does not match its manifest.

One process hashes each file once: a load passes several checks in the frontend (the set-up step
that picks the artifact, the registry that loads it) and `verify()` remembers the digest of every
file it hashed by the file's identity (device, inode, size, mtime, ctime; artifacts/file_digests.py).
Any write to a file changes its ctime, so a changed file is hashed again. A process that called
`remember_checks_in(folder)` keeps those digests in `folder` too and trusts the ones other
processes left there (the frontend and every worker: var/verified), so a warm start reads the
manifest and stats the files, and hashes only what changed since.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from artifacts.file_digests import FileDigests
from artifacts.file_digests import sha256_file as sha256_file  # prebuild/ and tests hash through it

MANIFEST = "manifest.json"
FORMAT = 1


class ArtifactIntegrityError(Exception):
    """The artifact's files do not match its manifest (missing, extra-changed, or corrupt)."""


@dataclass(slots=True, frozen=True)
class Manifest:
    name: str  # model name, e.g. "smollm2-135m"
    version: str  # immutable version id, derived from the file checksums
    compatibility_key: str  # runtime compatibility: architecture, weights, tokenizer, template
    files: dict[str, str]  # file name -> sha256 hex
    context_length: int  # maximum prompt + output tokens
    source: dict[str, str]  # provenance (package, file, sha256 of the source)
    quantization: str = "none"  # weight-only scheme: "none", "int8" or "int4" (engine/quant.py)
    sizes: dict[str, int] | None = None  # file name -> bytes (`llmctl build` writes them; a push needs them)

    @property
    def version_id(self) -> str:
        """The id clients and routes use: "name@version"."""
        return f"{self.name}@{self.version}"

    def to_json(self) -> str:
        sizes = {} if self.sizes is None else {"sizes": dict(sorted(self.sizes.items()))}
        return json.dumps(
            {
                "format": FORMAT,
                "name": self.name,
                "version": self.version,
                "compatibility_key": self.compatibility_key,
                "context_length": self.context_length,
                "files": dict(sorted(self.files.items())),
                "source": self.source,
                "quantization": self.quantization,
                **sizes,
            },
            indent=2,
        )


# the digests of the files this process checked (in memory; on disk too after remember_checks_in)
checked_files = FileDigests()


def remember_checks_in(folder: Path) -> None:
    """Keeps the digests of the files this process checks in `folder` (one record per file
    identity) and trusts those other processes recorded there."""
    checked_files.folder = folder


def derive_version(files: dict[str, str]) -> str:
    joined = "\n".join(f"{name}:{sha}" for name, sha in sorted(files.items()))
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


def derive_compatibility_key(architecture: str, files: dict[str, str], quantization: str = "none") -> str:
    """Two artifacts with equal keys produce identical KV state for identical token ids."""
    parts = [architecture, files["config.json"], files["model.safetensors"], files["tokenizer.json"]]
    if quantization != "none":
        parts.append(f"quantization={quantization}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def read_manifest(artifact_dir: Path) -> Manifest:
    path = artifact_dir / MANIFEST
    try:
        return parse_manifest(path.read_bytes(), str(path))
    except FileNotFoundError as e:
        raise ArtifactIntegrityError(f"no manifest at {path}") from e


def parse_manifest(data: bytes, where: str = "manifest") -> Manifest:
    """The manifest in `data` (manifest.json's bytes); ArtifactIntegrityError when it is malformed."""
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ArtifactIntegrityError(f"{where} is not valid JSON") from e
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else None
        raise ArtifactIntegrityError(f"{where} has unsupported format {found!r}")
    try:
        sizes = raw.get("sizes")
        return Manifest(
            name=str(raw["name"]),
            version=str(raw["version"]),
            compatibility_key=str(raw["compatibility_key"]),
            files={str(k): str(v) for k, v in raw["files"].items()},
            context_length=int(raw["context_length"]),
            source={str(k): str(v) for k, v in raw.get("source", {}).items()},
            quantization=str(raw.get("quantization", "none")),
            sizes=None if sizes is None else {str(k): int(v) for k, v in sizes.items()},
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ArtifactIntegrityError(f"{where} is missing or has a malformed field: {e}") from e


def verify(artifact_dir: Path, digests: FileDigests | None = None) -> Manifest:
    """Checks every file against the manifest's sha256; returns the manifest.

    Raises ArtifactIntegrityError on a missing or modified file, or a version that does not match
    the checksums (a manifest edited to fit changed files). digests: where files' digests are
    remembered (None: this process's `checked_files`).
    """
    digests = checked_files if digests is None else digests
    manifest = read_manifest(artifact_dir)
    if derive_version(manifest.files) != manifest.version:
        raise ArtifactIntegrityError(f"{artifact_dir}: manifest version does not match its checksums")
    for name, expected in sorted(manifest.files.items()):
        path = artifact_dir / name
        if not path.is_file():
            raise ArtifactIntegrityError(f"{artifact_dir}: {name} is missing")
        size = path.stat().st_size
        if manifest.sizes is not None and size != manifest.sizes.get(name):
            want = manifest.sizes.get(name)
            raise ArtifactIntegrityError(f"{artifact_dir}: {name} has {size} bytes, manifest says {want}")
        actual = digests.sha256(path)
        if actual != expected:
            raise ArtifactIntegrityError(
                f"{artifact_dir}: {name} has sha256 {actual[:12]}…, manifest says {expected[:12]}…"
            )
    return manifest
