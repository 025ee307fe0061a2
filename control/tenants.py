"""Tenants, their quotas and their API keys (stored only as sha256 digests)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from config.settings import TenantSpec
from control.errors import ApiKeyConflict
from control.models import ApiKey, Tenant
from control.revision import bump_revision


def hash_api_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def upsert_tenant(session: Session, spec: TenantSpec, *, now: datetime) -> Tenant:
    """Creates or updates the tenant; its key set becomes exactly `spec.api_keys`.

    Raises `ApiKeyConflict` if a key belongs to another tenant.
    """
    digests = {hash_api_key(k) for k in spec.api_keys}
    if digests:
        taken = session.scalars(
            select(ApiKey.tenant_id).where(ApiKey.key_sha256.in_(digests), ApiKey.tenant_id != spec.id)
        ).first()
        if taken is not None:
            raise ApiKeyConflict(spec.id)
    tenant = session.get(Tenant, spec.id, with_for_update=True, populate_existing=True)
    if tenant is None:
        tenant = Tenant(id=spec.id, created_at=now)
        session.add(tenant)
    settings = {
        "weight": spec.weight,
        "max_concurrent_generations": spec.max_concurrent_generations,
        "input_tokens_per_minute": spec.input_tokens_per_minute,
        "output_tokens_per_minute": spec.output_tokens_per_minute,
        "max_queued_tokens": spec.max_queued_tokens,
    }
    changed = any(getattr(tenant, k, None) != v for k, v in settings.items())
    if changed:
        for key, value in settings.items():
            setattr(tenant, key, value)
        tenant.updated_at = now
        session.flush()
    held = set(session.scalars(select(ApiKey.key_sha256).where(ApiKey.tenant_id == spec.id)))
    session.execute(delete(ApiKey).where(ApiKey.tenant_id == spec.id, ApiKey.key_sha256.not_in(digests)))
    session.add_all(ApiKey(key_sha256=d, tenant_id=spec.id, created_at=now) for d in sorted(digests - held))
    session.flush()
    if changed or held != digests:
        bump_revision(session, now=now)
    return tenant


@dataclass(slots=True, frozen=True)
class TenantEntry:
    """What a frontend caches of a tenant to authenticate its calls."""

    id: str
    weight: float
    key_sha256: tuple[str, ...]  # hex digests of its API keys


def tenant_directory(session: Session) -> list[TenantEntry]:
    """Every tenant with its key digests, by id."""
    digests: dict[str, list[str]] = {}
    for tenant_id, digest in session.execute(
        select(ApiKey.tenant_id, ApiKey.key_sha256).order_by(ApiKey.key_sha256)
    ):
        digests.setdefault(tenant_id, []).append(digest)
    return [
        TenantEntry(t.id, t.weight, tuple(digests.get(t.id, ())))
        for t in session.scalars(select(Tenant).order_by(Tenant.id))
    ]


def tenant_for_api_key(session: Session, api_key: str) -> Tenant | None:
    """The tenant holding `api_key`, None for an unknown key."""
    return session.scalars(
        select(Tenant)
        .join(ApiKey, ApiKey.tenant_id == Tenant.id)
        .where(ApiKey.key_sha256 == hash_api_key(api_key))
    ).one_or_none()
