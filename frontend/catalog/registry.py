"""The model versions this frontend serves, their aliases, and their pinned tokenizers.

An alias resolves to one immutable version at admission, through a route with canary weights;
"name@version" names one directly. Active generations keep the version they were pinned to. The
control store is the authority for routes; this is its cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from artifacts.manifest import Manifest, verify
from control.errors import VersionNotServable
from control.model_versions import pick_target
from frontend.catalog.tokenization import ModelTokenizer
from frontend.refusals import InvalidRequest


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

    @property
    def size_bytes(self) -> int:
        """The artifact's files together (from the manifest; older manifests: from the files)."""
        if self.manifest.sizes is not None:
            return sum(self.manifest.sizes.values())
        try:
            return sum((self.artifact_dir / name).stat().st_size for name in self.manifest.files)
        except OSError:  # its files were deleted at retirement
            return 0


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
    """A cache of the control store's catalog (frontend/catalog/cache.py refreshes it): the versions this
    frontend has loaded, and every alias route with its canary weights."""

    def __init__(self) -> None:
        self.versions: dict[str, ServedVersion] = {}
        self.routes: dict[str, dict[str, float]] = {}  # alias -> {version id: canary weight}
        self.statuses: dict[str, str] = {}  # version id -> its status in the store (absent: READY)
        # Admin writes this frontend applies to its caches itself, counted after each one commits and
        # before its caches change: a catalog read that spans one may predate it (CatalogCache.refresh)
        self.local_writes = 0

    def set_route(self, alias: str, route: dict[str, float]) -> None:
        """An Admin route change this frontend committed: counted, then cached."""
        self.local_writes += 1
        self.routes[alias] = dict(route)

    def set_status(self, version_id: str, status: str) -> None:
        """An Admin status change this frontend committed: counted, then cached."""
        self.local_writes += 1
        self.statuses[version_id] = status

    @property
    def aliases(self) -> dict[str, str]:
        """alias -> its main version (the largest weight)."""
        return {a: max(r, key=lambda v: (r[v], v)) for a, r in self.routes.items()}

    def add_version(self, version: ServedVersion) -> None:
        self.versions[version.version_id] = version

    def resolve(self, model: str, key: str = "") -> ServedVersion:
        """An alias or "name@version" -> the pinned version; INVALID_ARGUMENT if unknown.

        An alias with several weighted targets picks one of those loaded here by a hash of `key`
        (tenant and request id), so a retry of the same request pins the same version."""
        route = self.routes.get(model)
        version_id: str | None = model
        if route is not None:
            loaded = {v: w for v, w in route.items() if v in self.versions}
            version_id = pick_target(loaded, _draw(key)) if loaded else None
        version = self.versions.get(version_id) if version_id is not None else None
        if version_id is None or version is None:
            raise InvalidRequest("UNKNOWN_MODEL", f"unknown model {model[:128]!r}", model=model[:128])
        status = self.status(version_id)
        if status in ("DRAINING", "RETIRED"):  # retiring or retired: no new pins
            raise VersionNotServable(version_id, status)
        return version

    def allows(self, allowed: tuple[str, ...], model: str, version_id: str) -> bool:
        """Whether a tenant limited to the aliases `allowed` ((): every model) may use `model`, an
        alias or a version id (one some allowed alias routes to now), pinned to `version_id`."""
        if not allowed or model in allowed:
            return True
        return model == version_id and any(version_id in self.routes.get(alias, {}) for alias in allowed)

    def status(self, version_id: str) -> str:
        return self.statuses.get(version_id, "READY")


def _draw(key: str) -> float:
    """Uniform in [0, 1), fixed by `key` (random when key is empty)."""
    seed = key.encode() if key else os.urandom(16)
    return int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") / 2**64
