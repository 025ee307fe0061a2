"""Tenants: their weight and quotas, monthly budget, allowed models and disabled flag (the keys are
control/api_keys.py's; what frontends cache of both, control/directory.py's).

A tenant is created, changed and disabled through Admin at run time, each change recorded
(control/tenant_changes.py) with a bump of the catalog revision. The config's `[[tenants]]` seed
the store (`upsert_tenant`): a tenant the config lists is created with its keys, and re-seeded at
each start only while nothing but the config wrote it; once Admin changed it, the store's tenant
holds (as routes do). A config key that leaves the config is revoked, not deleted.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from config.settings import MAX_QUOTA, TenantSpec
from contracts.scopes import SCOPES
from control.api_keys import MAX_MONEY, KeySettings, create_key, hash_api_key
from control.errors import ApiKeyConflict, InvalidSetting, TenantExists, TenantNotFound
from control.models import ApiKey, Origin, Tenant
from control.revision import bump_revision
from control.tenant_changes import Action, record

log = logging.getLogger(__name__)
TENANT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
QUOTAS = (
    "max_concurrent_generations",
    "input_tokens_per_minute",
    "output_tokens_per_minute",
    "max_queued_tokens",
)


@dataclass(slots=True, frozen=True)
class TenantSettings:
    """A tenant's settings (defaults: a config tenant's, config/settings.py TenantSpec)."""

    weight: float = 1.0  # its share in weighted fair queuing (positive)
    max_concurrent_generations: int = 16
    input_tokens_per_minute: int = 1_000_000
    output_tokens_per_minute: int = 200_000
    max_queued_tokens: int = 64_000
    monthly_budget_micros: int | None = None  # micro-USD per calendar month (UTC); None: no budget
    allowed_models: tuple[str, ...] = ()  # aliases it may use; (): every model

    def __post_init__(self) -> None:
        if not 0 < self.weight < math.inf:
            raise InvalidSetting("weight", "must be positive and finite")
        for name in QUOTAS:
            if not 0 <= getattr(self, name) <= MAX_QUOTA:
                raise InvalidSetting(name, f"between 0 and {MAX_QUOTA}")
        if self.monthly_budget_micros is not None and not 0 <= self.monthly_budget_micros <= MAX_MONEY:
            raise InvalidSetting("monthly_budget_micros", f"between 0 and {MAX_MONEY}")
        if any(not m or "," in m for m in self.allowed_models):
            raise InvalidSetting("models", "aliases, non-empty and without commas")

    @staticmethod
    def of_spec(spec: TenantSpec) -> TenantSettings:
        return TenantSettings(spec.weight, *(getattr(spec, q) for q in QUOTAS))


@dataclass(slots=True, frozen=True)
class TenantUpdate:
    """Settings to change: those given (not None); `clear` names the budget or models to remove."""

    weight: float | None = None
    max_concurrent_generations: int | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    max_queued_tokens: int | None = None
    monthly_budget_micros: int | None = None
    allowed_models: tuple[str, ...] | None = None
    clear: frozenset[str] = field(default_factory=frozenset)  # "monthly_budget_micros", "allowed_models"


@dataclass(slots=True, frozen=True)
class TenantView:
    id: str
    settings: TenantSettings
    disabled: bool
    created_at: datetime
    updated_at: datetime
    active_keys: int  # keys not revoked


def settings_of(t: Tenant) -> TenantSettings:
    return TenantSettings(
        weight=t.weight,
        max_concurrent_generations=t.max_concurrent_generations,
        input_tokens_per_minute=t.input_tokens_per_minute,
        output_tokens_per_minute=t.output_tokens_per_minute,
        max_queued_tokens=t.max_queued_tokens,
        monthly_budget_micros=t.monthly_budget_micros,
        allowed_models=tuple(m for m in (t.allowed_models or "").split(",") if m),
    )


def create_tenant(
    session: Session, tenant_id: str, settings: TenantSettings, *, actor: str, now: datetime
) -> TenantView:
    if not TENANT_ID.fullmatch(tenant_id):
        raise InvalidSetting(
            "tenant_id", "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if session.get(Tenant, tenant_id) is not None:
        raise TenantExists(tenant_id)
    tenant = Tenant(id=tenant_id, created_at=now, updated_at=now, origin=Origin.ADMIN.value)
    _apply(tenant, settings)
    session.add(tenant)
    session.flush()
    record(
        session,
        actor=actor,
        action=Action.TENANT_CREATE,
        tenant_id=tenant_id,
        detail=_detail(settings),
        now=now,
    )
    bump_revision(session, now=now)
    return _view(session, tenant)


def update_tenant(
    session: Session, tenant_id: str, changes: TenantUpdate, *, actor: str, now: datetime
) -> TenantView:
    tenant = _locked(session, tenant_id)
    values: dict[str, Any] = {f.name: getattr(settings_of(tenant), f.name) for f in fields(TenantSettings)}
    given = {f.name: getattr(changes, f.name) for f in fields(TenantUpdate) if f.name != "clear"}
    values |= {k: v for k, v in given.items() if v is not None}
    if "monthly_budget_micros" in changes.clear:
        values["monthly_budget_micros"] = None
    if "allowed_models" in changes.clear:
        values["allowed_models"] = ()
    settings = TenantSettings(**values)
    _apply(tenant, settings)
    tenant.updated_at, tenant.origin = now, Origin.ADMIN.value
    session.flush()
    record(
        session,
        actor=actor,
        action=Action.TENANT_UPDATE,
        tenant_id=tenant_id,
        detail=_detail(settings),
        now=now,
    )
    bump_revision(session, now=now)
    return _view(session, tenant)


def set_tenant_disabled(
    session: Session, tenant_id: str, disabled: bool, *, actor: str, now: datetime
) -> TenantView:
    """Disables (no new generations; running ones finish) or enables a tenant; again is a no-op."""
    tenant = _locked(session, tenant_id)
    if (tenant.disabled_at is not None) != disabled:
        tenant.disabled_at = now if disabled else None
        tenant.updated_at, tenant.origin = now, Origin.ADMIN.value
        session.flush()
        action = Action.TENANT_DISABLE if disabled else Action.TENANT_ENABLE
        record(session, actor=actor, action=action, tenant_id=tenant_id, now=now)
        bump_revision(session, now=now)
    return _view(session, tenant)


def get_tenant(session: Session, tenant_id: str) -> TenantView:
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise TenantNotFound(tenant_id)
    return _view(session, tenant)


def list_tenants(session: Session) -> list[TenantView]:
    return [_view(session, t) for t in session.scalars(select(Tenant).order_by(Tenant.id))]


def upsert_tenant(session: Session, spec: TenantSpec, *, now: datetime) -> Tenant:
    """Seeds a config tenant: created with the config's keys; re-seeded (quotas, and its config keys
    exactly `spec.api_keys`: new ones added, dropped ones revoked) while only the config wrote it.
    Keys created through Admin are never touched. `ApiKeyConflict` if a key is another tenant's."""
    digests = {hash_api_key(k): k for k in spec.api_keys}
    if digests:
        taken = session.scalars(
            select(ApiKey.tenant_id).where(ApiKey.key_sha256.in_(digests), ApiKey.tenant_id != spec.id)
        ).first()
        if taken is not None:
            raise ApiKeyConflict(spec.id)
    tenant = session.get(Tenant, spec.id, with_for_update=True, populate_existing=True)
    if tenant is not None and tenant.origin != Origin.CONFIG.value:
        log.info("tenant %s keeps the settings set through Admin (not the config's)", spec.id)
        return tenant
    settings = TenantSettings.of_spec(spec)
    changed = tenant is None
    if tenant is None:
        tenant = Tenant(id=spec.id, created_at=now, updated_at=now, origin=Origin.CONFIG.value)
        _apply(tenant, settings)
        session.add(tenant)
        session.flush()
    elif settings_of(tenant) != settings:  # only the config wrote it: no budget, no model list
        _apply(tenant, settings)
        tenant.updated_at, changed = now, True
    held = {k.key_sha256: k for k in session.scalars(select(ApiKey).where(ApiKey.tenant_id == spec.id))}
    for digest, secret in sorted(digests.items()):
        if digest not in held:
            create_key(
                session,
                spec.id,
                KeySettings(name="config", scopes=SCOPES),
                actor="config",
                now=now,
                secret=secret,
                origin=Origin.CONFIG,
            )
    for digest, key in held.items():
        if key.origin == Origin.CONFIG.value and digest not in digests and key.revoked_at is None:
            key.revoked_at, changed = now, True
    session.flush()
    if changed:
        bump_revision(session, now=now)
    return tenant


def _locked(session: Session, tenant_id: str) -> Tenant:
    tenant = session.get(Tenant, tenant_id, with_for_update=True, populate_existing=True)
    if tenant is None:
        raise TenantNotFound(tenant_id)
    return tenant


def _apply(tenant: Tenant, s: TenantSettings) -> None:
    tenant.weight = s.weight
    for q in QUOTAS:
        setattr(tenant, q, getattr(s, q))
    tenant.monthly_budget_micros = s.monthly_budget_micros
    tenant.allowed_models = ",".join(s.allowed_models) or None


def _detail(s: TenantSettings) -> dict[str, Any]:
    detail: dict[str, Any] = {f.name: getattr(s, f.name) for f in fields(TenantSettings)}
    detail["allowed_models"] = list(s.allowed_models)
    return detail


def _view(session: Session, t: Tenant) -> TenantView:
    active = session.scalars(
        select(ApiKey.id).where(ApiKey.tenant_id == t.id, ApiKey.revoked_at.is_(None))
    ).all()
    return TenantView(
        t.id, settings_of(t), t.disabled_at is not None, t.created_at, t.updated_at, len(active)
    )
