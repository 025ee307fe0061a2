"""Records what this platform serves in the control store at start-up: its tenants (key digests,
weights, quotas), its checksum-verified model versions (READY once a worker loaded them) and alias
routes. Idempotent: a restart with the same config changes nothing."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from control.model_versions import VersionSpec, register_version, set_alias_route, set_version_status
from control.models import ModelVersionStatus
from control.store import Store
from control.tenants import TenantSpec, upsert_tenant
from frontend.config import PlatformConfig
from frontend.registry import ModelRegistry, ServedVersion

ROOT = Path(__file__).resolve().parent.parent
SQLITE_PREFIX = "sqlite:///"


def store_url(url: str) -> str:
    """A relative SQLite path is relative to the repository root; its folder is created."""
    if not url.startswith(SQLITE_PREFIX):
        return url
    path = Path(url[len(SQLITE_PREFIX) :])
    if not path.is_absolute():
        path = ROOT / path
    path.parent.mkdir(parents=True, exist_ok=True)
    return SQLITE_PREFIX + str(path)


def version_spec(version: ServedVersion) -> VersionSpec:
    m = version.manifest
    return VersionSpec(
        name=m.name,
        version=m.version,
        weights_sha256=m.files["model.safetensors"],
        tokenizer_sha256=m.files["tokenizer.json"],
        template_sha256=m.files["chat_template.jinja"],
        compatibility_key=m.compatibility_key,
        artifact_uri=str(version.artifact_dir),
    )


def record_catalog(store: Store, cfg: PlatformConfig, registry: ModelRegistry, *, now: datetime) -> None:
    with store.transaction() as session:
        for t in cfg.tenants:
            upsert_tenant(
                session,
                TenantSpec(
                    id=t.id,
                    api_keys=t.api_keys,
                    weight=t.weight,
                    max_concurrent_generations=t.max_concurrent_generations,
                    input_tokens_per_minute=t.input_tokens_per_minute,
                    output_tokens_per_minute=t.output_tokens_per_minute,
                    max_queued_tokens=t.max_queued_tokens,
                ),
                now=now,
            )
        for version in registry.versions.values():
            register_version(session, version_spec(version), now=now)
            set_version_status(session, version.version_id, ModelVersionStatus.READY, now=now)
        for alias, route in registry.routes.items():
            set_alias_route(session, alias, {v: float(w) for v, w in route.items()})
