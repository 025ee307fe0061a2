"""A worker host fetching a model version it lacks from a frontend's repository
(Admin.FetchArtifactFile), so remote workers can serve pushed versions.

    <into>/.fetch/<name>-<version>/   the download in progress: each file grows from where it stopped
    <into>/<name>/<version>/          the verified artifact, moved in by one rename

The manifest is fetched first and must name the requested version, with a version that matches its
own checksums. Each file resumes from the size already on disk (a broken stream loses nothing),
and is checked against the manifest's sha256 once complete: a mismatch deletes that file (a retry
starts it over) and raises `ArtifactIntegrityError`, so nothing unverified is ever in place to load.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc

from artifacts.manifest import (
    MANIFEST,
    ArtifactIntegrityError,
    derive_version,
    parse_manifest,
    sha256_file,
    verify,
)
from config.settings import PlatformConfig
from llm.v1 import admin_pb2, admin_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
Metadata = Sequence[tuple[str, str]]
Fetch = Callable[[str], Path]  # version id -> its verified artifact folder on this host, downloaded if absent
log = logging.getLogger(__name__)


def repository_fetch(cfg: PlatformConfig) -> Fetch | None:
    """Downloads from [fleet] repository_target (Admin.FetchArtifactFile with [fleet] worker_key)
    into this host's [repository] path; None without a target. OSError when it cannot be reached."""
    target = cfg.fleet.repository_target
    if not target:
        return None
    root = Path(cfg.repository.path)
    root = root if root.is_absolute() else ROOT / root
    metadata = (("authorization", f"Bearer {cfg.fleet.worker_key}"),)

    def fetch(version_id: str) -> Path:
        with grpc.insecure_channel(target) as channel:
            try:
                folder = fetch_version(channel, version_id, root, metadata)
            except grpc.RpcError as e:
                raise OSError(f"fetching {version_id} from {target} failed: {e.code().name}") from e
        log.info("version %s is on this host (from %s)", version_id, target)
        return folder

    return fetch


def fetch_version(channel: grpc.Channel, version_id: str, into: Path, metadata: Metadata = ()) -> Path:
    """The verified artifact folder of `version_id` under `into`, downloaded as needed (blocking)."""
    name, _, version = version_id.partition("@")
    if not name or not version or "/" in version_id or ".." in version_id:
        raise ValueError(f"not a version id: {version_id!r}")
    final = into / name / version
    if (final / MANIFEST).is_file():
        verify(final)
        return final
    stub = admin_pb2_grpc.AdminStub(channel)  # type: ignore[no-untyped-call]
    manifest_json = b"".join(_chunks(stub, version_id, MANIFEST, 0, metadata))
    manifest = parse_manifest(manifest_json, f"the manifest of {version_id}")
    if manifest.version_id != version_id or derive_version(manifest.files) != manifest.version:
        raise ArtifactIntegrityError(f"the repository's manifest for {version_id} names another artifact")
    partial = into / ".fetch" / f"{name}-{version}"
    partial.mkdir(parents=True, exist_ok=True)
    for file, expected in sorted(manifest.files.items()):
        size = (manifest.sizes or {}).get(file)
        _download(stub, version_id, file, partial / file, size, expected, metadata)
    (partial / MANIFEST).write_bytes(manifest_json)
    verify(partial)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(partial, final)
    return final


def _download(
    stub: admin_pb2_grpc.AdminStub,
    version_id: str,
    file: str,
    path: Path,
    size: int | None,
    expected: str,
    metadata: Metadata,
) -> None:
    have = path.stat().st_size if path.exists() else 0
    if size is not None and have > size:  # longer than the file can be: start over
        path.unlink()
        have = 0
    if size is None or have < size:
        with path.open("ab") as f:
            for data in _chunks(stub, version_id, file, have, metadata):
                f.write(data)
    if sha256_file(path) != expected:
        path.unlink()
        raise ArtifactIntegrityError(f"{version_id}: {file} does not match the manifest's sha256; discarded")


def _chunks(
    stub: admin_pb2_grpc.AdminStub, version_id: str, file: str, offset: int, metadata: Metadata
) -> Iterator[bytes]:
    request = admin_pb2.FetchArtifactFileRequest(version_id=version_id, file=file, offset=offset)
    expect = offset
    for chunk in stub.FetchArtifactFile(request, metadata=tuple(metadata)):
        if chunk.file != file or chunk.offset != expect:
            raise ArtifactIntegrityError(f"{version_id}: {file}: chunk at {chunk.offset}, expected {expect}")
        expect += len(chunk.data)
        yield chunk.data
