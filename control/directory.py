"""What every frontend caches of tenants and keys to authenticate and admit calls (frontend/auth.py,
reloaded by frontend/catalog/cache.py when the catalog revision moves)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api_keys import hash_api_key
from control.models import ApiKey, Tenant
from control.tenants import settings_of


@dataclass(slots=True, frozen=True)
class KeyEntry:
    """What a frontend caches of a key to authenticate a call with it."""

    id: str
    sha256: str  # the current secret's digest
    scopes: tuple[str, ...]
    expires_at: datetime | None
    previous_sha256: str | None = None  # a rotation's old secret ...
    previous_expires_at: datetime | None = None  # ... accepted until then


@dataclass(slots=True, frozen=True)
class TenantEntry:
    """What a frontend caches of a tenant to authenticate and admit its calls."""

    id: str
    weight: float
    keys: tuple[KeyEntry, ...]  # its keys not revoked
    disabled: bool = False
    allowed_models: tuple[str, ...] = ()  # (): every model


def tenant_directory(session: Session) -> list[TenantEntry]:
    """Every tenant with its keys not revoked, by id."""
    keys: dict[str, list[KeyEntry]] = {}
    for k in session.scalars(select(ApiKey).where(ApiKey.revoked_at.is_(None)).order_by(ApiKey.id)):
        scopes = tuple(s for s in k.scopes.split(",") if s)
        entry = KeyEntry(k.id, k.key_sha256, scopes, k.expires_at, k.previous_sha256, k.previous_expires_at)
        keys.setdefault(k.tenant_id, []).append(entry)
    return [
        TenantEntry(
            t.id,
            t.weight,
            tuple(keys.get(t.id, ())),
            t.disabled_at is not None,
            settings_of(t).allowed_models,
        )
        for t in session.scalars(select(Tenant).order_by(Tenant.id))
    ]


def tenant_for_api_key(session: Session, api_key: str) -> Tenant | None:
    """The tenant holding `api_key` as a current, unrevoked secret; None for any other key."""
    return session.scalars(
        select(Tenant)
        .join(ApiKey, ApiKey.tenant_id == Tenant.id)
        .where(ApiKey.key_sha256 == hash_api_key(api_key), ApiKey.revoked_at.is_(None))
    ).one_or_none()
