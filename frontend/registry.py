"""The model versions this frontend serves, their aliases, and their pinned tokenizers.

An alias resolves to one immutable version at admission, through a route with canary weights;
"name@version" names one directly. Active generations keep the version they were pinned to.
"""

from __future__ import annotations

import hashlib
import json
import os
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
        self.routes: dict[str, dict[str, int]] = {}  # alias -> {version id: canary weight}

    @property
    def aliases(self) -> dict[str, str]:
        """alias -> its main version (the largest weight)."""
        return {a: max(r, key=lambda v: (r[v], v)) for a, r in self.routes.items()}

    def add(self, alias: str, version: ServedVersion) -> None:
        self.add_version(version)
        self.routes[alias] = {version.version_id: 100}

    def add_version(self, version: ServedVersion) -> None:
        self.versions[version.version_id] = version

    def set_route(self, alias: str, weights: dict[str, int]) -> None:
        """Points an alias at versions with canary weights (each known, weights positive)."""
        if not alias or "@" in alias:
            raise invalid_argument(
                "INVALID_ALIAS", f"alias {alias[:128]!r} must be non-empty and without '@'"
            )
        if not weights or any(w <= 0 for w in weights.values()):
            raise invalid_argument(
                "INVALID_ROUTE", "a route needs at least one target, every weight positive"
            )
        unknown = [v for v in weights if v not in self.versions]
        if unknown:
            raise invalid_argument("UNKNOWN_MODEL", f"unknown model version {unknown[0][:128]!r}")
        self.routes[alias] = dict(weights)

    def resolve(self, model: str, key: str = "") -> ServedVersion:
        """An alias or "name@version" -> the pinned version; INVALID_ARGUMENT if unknown.

        An alias with several weighted targets picks one by a hash of `key` (tenant and request id),
        so a retry of the same request pins the same version."""
        route = self.routes.get(model)
        version_id = model if route is None else _draw(route, key)
        version = self.versions.get(version_id)
        if version is None:
            raise invalid_argument("UNKNOWN_MODEL", f"unknown model {model!r}", model=model[:128])
        return version


def _draw(route: dict[str, int], key: str) -> str:
    """A target with probability weight / total, fixed by `key` (random when key is empty)."""
    if len(route) == 1:
        return next(iter(route))
    seed = key.encode() if key else os.urandom(16)
    point = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big") % sum(route.values())
    for version_id, weight in sorted(route.items()):
        if point < weight:
            return version_id
        point -= weight
    raise AssertionError("unreachable")
