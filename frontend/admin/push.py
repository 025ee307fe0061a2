"""The model repository and pushes into it (Admin.PushModelVersion, frontend/admin/service.py).

    <repository>/<name>/<version>/     artifacts, immutable once moved in (artifacts/manifest.py)
    <repository>/.staging/<random>/    one upload in progress; removed when it ends, whatever way

An `Upload` checks the manifest first (format, version derived from the checksums, exactly the
artifact's files, every size, the size limit, no other artifact under the same id), then takes each
file's bytes in order, counting and hashing them as they come. `finish()` checks every size and
sha256, then renames the staging folder into place: one rename, so the repository never holds a
partial artifact. Every refusal is a `PushRefused` (frontend/api_errors.py: INVALID_ARGUMENT,
RESOURCE_EXHAUSTED for the size limit, ALREADY_EXISTS for a conflict) and `abort()` removes the
staging folder; so does the next start for an upload a crash cut off. All methods block (file I/O).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

from artifacts.manifest import (
    MANIFEST,
    ArtifactIntegrityError,
    Manifest,
    derive_compatibility_key,
    derive_version,
    parse_manifest,
    read_manifest,
)

ARTIFACT_FILES = frozenset({"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"})
STAGING = ".staging"
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")


class PushRefused(Exception):
    """INVALID_ARGUMENT: the push does not match its manifest, or the manifest is wrong."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PushTooLarge(PushRefused):
    """RESOURCE_EXHAUSTED: the artifact is larger than [repository] max_push_bytes."""


class PushConflict(PushRefused):
    """ALREADY_EXISTS: the repository holds another artifact under this version id."""


@dataclass(slots=True, frozen=True)
class Repository:
    root: Path
    max_push_bytes: int

    def folder(self, manifest: Manifest) -> Path:
        return self.root / manifest.name / manifest.version

    def clear_staging(self) -> None:
        """Removes what uploads cut off by a crash left (at start-up, before any push)."""
        shutil.rmtree(self.root / STAGING, ignore_errors=True)

    def upload(self, manifest_json: bytes) -> Upload:
        return Upload(self, manifest_json)


@dataclass(slots=True, eq=False)
class Upload:
    repository: Repository
    manifest_json: bytes
    manifest: Manifest = field(init=False)
    staging: Path | None = None
    _written: dict[str, int] = field(default_factory=dict)
    _hashes: dict[str, hashlib._Hash] = field(default_factory=dict)
    _open: tuple[str, BinaryIO] | None = None

    def start(self) -> Path | None:
        """Checks the manifest and opens the staging folder; returns the artifact's folder when the
        repository already holds this very artifact (nothing needs to be sent then)."""
        self.manifest = manifest = _checked_manifest(self.manifest_json)
        sizes = manifest.sizes or {}
        total, limit = sum(sizes.values()), self.repository.max_push_bytes
        if total > limit:
            raise PushTooLarge("PUSH_TOO_LARGE", f"the artifact has {total} bytes; the limit is {limit}")
        existing = self.repository.folder(manifest)
        if (existing / MANIFEST).is_file():
            if not _same_artifact(read_manifest(existing), manifest):
                raise PushConflict(
                    "VERSION_EXISTS", f"{manifest.version_id} is already in the repository with other content"
                )
            return existing
        staging_root = self.repository.root / STAGING
        staging_root.mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix=f"{manifest.name}-{manifest.version}-", dir=staging_root))
        return None

    def write(self, file: str, offset: int, data: bytes) -> None:
        """Appends `data` at `offset` of `file`: each file's bytes in order, none beyond its size."""
        assert self.staging is not None, "start() first"
        sizes = self.manifest.sizes or {}
        if file not in sizes:
            raise PushRefused("UNKNOWN_FILE", f"{file[:128]!r} is not a file of the manifest")
        written = self._written.get(file, 0)
        if offset != written:
            raise PushRefused("OUT_OF_ORDER", f"{file}: chunk at offset {offset}, expected {written}")
        if written + len(data) > sizes[file]:
            raise PushRefused("SIZE_MISMATCH", f"{file}: more bytes than the manifest's {sizes[file]}")
        if self._open is None or self._open[0] != file:
            self._close()
            self._open = (file, (self.staging / file).open("ab"))
        self._open[1].write(data)
        self._hashes.setdefault(file, hashlib.sha256()).update(data)
        self._written[file] = written + len(data)

    def finish(self) -> Path:
        """Checks every file's size and sha256, then moves the artifact into the repository."""
        assert self.staging is not None, "start() first"
        self._close()
        m = self.manifest
        for name, size in sorted((m.sizes or {}).items()):
            got = self._written.get(name, 0)
            if got != size:
                raise PushRefused("INCOMPLETE_UPLOAD", f"{name}: {got} of {size} bytes arrived")
            digest = self._hashes[name].hexdigest() if name in self._hashes else hashlib.sha256().hexdigest()
            if digest != m.files[name]:
                raise PushRefused(
                    "CHECKSUM_MISMATCH",
                    f"{name}: sha256 {digest[:12]}…, the manifest says {m.files[name][:12]}…",
                )
            if size == 0:
                (self.staging / name).touch()
        _check_compatibility_key(self.staging, m)
        (self.staging / MANIFEST).write_bytes(self.manifest_json)
        final = self.repository.folder(m)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(self.staging, final)
        except OSError:  # another push of this id won the race: fine when it is the same artifact
            if not (final / MANIFEST).is_file() or not _same_artifact(read_manifest(final), m):
                raise PushConflict("VERSION_EXISTS", f"{m.version_id} is already in the repository") from None
            return final
        self.staging = None
        return final

    def abort(self) -> None:
        """Removes the staging folder (a no-op once the artifact moved in)."""
        self._close()
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None

    def _close(self) -> None:
        if self._open is not None:
            self._open[1].close()
            self._open = None


def _checked_manifest(data: bytes) -> Manifest:
    try:
        m = parse_manifest(data, "the pushed manifest")
    except ArtifactIntegrityError as e:
        raise PushRefused("MANIFEST_INVALID", str(e)) from e
    if not _NAME.match(m.name):
        raise PushRefused("MANIFEST_INVALID", f"model name {m.name[:128]!r} must be [a-z0-9._-], at most 128")
    if set(m.files) != ARTIFACT_FILES:
        missing, extra = sorted(ARTIFACT_FILES - set(m.files)), sorted(set(m.files) - ARTIFACT_FILES)
        raise PushRefused(
            "MANIFEST_INVALID", f"the manifest's files: missing {missing}, unexpected {extra[:8]}"
        )
    if derive_version(m.files) != m.version:
        raise PushRefused("MANIFEST_INVALID", "the manifest's version does not match its file checksums")
    if any(not re.fullmatch(r"[0-9a-f]{64}", sha) for sha in m.files.values()):
        raise PushRefused("MANIFEST_INVALID", "every file checksum must be 64 lower-case hex digits")
    if m.sizes is None or set(m.sizes) != set(m.files) or any(s < 0 for s in m.sizes.values()):
        raise PushRefused(
            "MANIFEST_INVALID", "the manifest needs the size of every file (build it with llmctl build)"
        )
    return m


def _same_artifact(a: Manifest, b: Manifest) -> bool:
    """Equal but for provenance and sizes (an artifact built before sizes were recorded)."""
    return replace(a, source={}, sizes=None) == replace(b, source={}, sizes=None)


def _check_compatibility_key(folder: Path, m: Manifest) -> None:
    try:
        architectures = json.loads((folder / "config.json").read_text()).get("architectures") or [""]
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
        raise PushRefused("ARTIFACT_INVALID", "config.json is not a JSON object") from e
    if derive_compatibility_key(str(architectures[0]), m.files, m.quantization) != m.compatibility_key:
        raise PushRefused("MANIFEST_INVALID", "the manifest's compatibility key does not match its files")
