"""API keys: a public id, a secret shown once and kept only as its sha256 digest, scopes, an expiry,
and the key's own rate limits and monthly budget beside its tenant's.

A rotation gives the key a new secret under the same id (its usage, limits and budget stay its
own); the secret it replaces is accepted until the overlap ends, then never again. A revocation is
final and kept (usage names the key). Every change is recorded (control/tenant_changes.py) and
bumps the catalog revision, so every frontend's key cache follows within one refresh.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from contracts.scopes import SCOPES
from control.errors import ApiKeyNotFound, ApiKeyRevoked, InvalidSetting, TenantNotFound
from control.models import ApiKey, Origin, Tenant
from control.revision import bump_revision
from control.tenant_changes import Action, record

SECRET_PREFIX = "sk-"
MAX_LIMIT = 2**31 - 1  # rate limits are 32-bit columns
MAX_MONEY = 2**62  # micro-USD: a budget fits a 64-bit column with room for the month's sums


MAX_OVERLAP = timedelta(days=366)  # a rotation's old secret is not a second key


def hash_api_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


def new_secret() -> str:
    """256 random bits, URL-safe: what a client sends as `Bearer <secret>`."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def new_key_id() -> str:
    return f"key_{secrets.token_hex(8)}"


@dataclass(slots=True, frozen=True)
class KeySettings:
    """What a key is created with (and what `update_key` may change)."""

    name: str = ""  # a label for people, at most 200 characters
    scopes: tuple[str, ...] = SCOPES  # a non-empty subset of SCOPES
    expires_at: datetime | None = None  # None: never
    input_tokens_per_minute: int | None = None  # None: only the tenant's limit applies
    output_tokens_per_minute: int | None = None
    monthly_budget_micros: int | None = None  # micro-USD per calendar month; None: only the tenant's

    def __post_init__(self) -> None:
        if len(self.name) > 200:
            raise InvalidSetting("name", "at most 200 characters")
        if not self.scopes or not set(self.scopes) <= set(SCOPES):
            raise InvalidSetting("scopes", f"a non-empty subset of {','.join(SCOPES)}")
        for name in ("input_tokens_per_minute", "output_tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= MAX_LIMIT:
                raise InvalidSetting(name, f"between 0 and {MAX_LIMIT}")
        if self.monthly_budget_micros is not None and not 0 <= self.monthly_budget_micros <= MAX_MONEY:
            raise InvalidSetting("monthly_budget_micros", f"between 0 and {MAX_MONEY}")


@dataclass(slots=True, frozen=True)
class KeyView:
    """A key as listed: never its secret."""

    id: str
    tenant_id: str
    settings: KeySettings
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    previous_expires_at: datetime | None  # a rotation's old secret is accepted until then

    @staticmethod
    def of(k: ApiKey) -> KeyView:
        return KeyView(
            k.id,
            k.tenant_id,
            settings_of(k),
            k.created_at,
            k.revoked_at,
            k.last_used_at,
            k.previous_expires_at,
        )


@dataclass(slots=True, frozen=True)
class CreatedKey:
    key: KeyView
    secret: str  # shown to its creator once; the store keeps only its digest


@dataclass(slots=True, frozen=True)
class KeyUpdate:
    """Settings to change: those given (not None), and those named in `clear` set to None."""

    name: str | None = None
    scopes: tuple[str, ...] | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    monthly_budget_micros: int | None = None
    clear: frozenset[str] = field(default_factory=frozenset)  # of the three limits above


def settings_of(k: ApiKey) -> KeySettings:
    scopes = tuple(s for s in k.scopes.split(",") if s)
    return KeySettings(
        k.name,
        scopes,
        k.expires_at,
        k.input_tokens_per_minute,
        k.output_tokens_per_minute,
        k.monthly_budget_micros,
    )


def create_key(
    session: Session,
    tenant_id: str,
    settings: KeySettings,
    *,
    actor: str,
    now: datetime,
    secret: str | None = None,
    origin: Origin = Origin.ADMIN,
) -> CreatedKey:
    """A new key of `tenant_id` (`TenantNotFound` if none) with a new secret (or `secret`, the config's)."""
    if session.get(Tenant, tenant_id) is None:
        raise TenantNotFound(tenant_id)
    if settings.expires_at is not None and settings.expires_at <= now:
        raise InvalidSetting("expires_at", "must be in the future")
    secret = secret or new_secret()
    key = ApiKey(
        id=new_key_id(),
        tenant_id=tenant_id,
        key_sha256=hash_api_key(secret),
        created_at=now,
        origin=origin.value,
        **_columns(settings),
    )
    session.add(key)
    session.flush()
    record(
        session,
        actor=actor,
        action=Action.KEY_CREATE,
        tenant_id=tenant_id,
        key_id=key.id,
        detail=_detail(settings),
        now=now,
    )
    bump_revision(session, now=now)
    return CreatedKey(KeyView.of(key), secret)


def get_key(session: Session, key_id: str, *, tenant_id: str = "", lock: bool = False) -> ApiKey:
    """The key (of `tenant_id` when given: another tenant's is `ApiKeyNotFound`, as an unknown one)."""
    key = session.get(ApiKey, key_id, with_for_update=lock, populate_existing=lock)
    if key is None or (tenant_id and key.tenant_id != tenant_id):
        raise ApiKeyNotFound(key_id)
    return key


def list_keys(session: Session, tenant_id: str) -> list[KeyView]:
    """The tenant's keys, revoked ones too, oldest first."""
    query = select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at, ApiKey.id)
    return [KeyView.of(k) for k in session.scalars(query)]


def revoke_key(session: Session, key_id: str, *, actor: str, now: datetime, tenant_id: str = "") -> KeyView:
    """Revokes the key (and a rotation's previous secret with it); revoking again changes nothing."""
    key = get_key(session, key_id, tenant_id=tenant_id, lock=True)
    if key.revoked_at is None:
        key.revoked_at = now
        session.flush()
        record(
            session, actor=actor, action=Action.KEY_REVOKE, tenant_id=key.tenant_id, key_id=key.id, now=now
        )
        bump_revision(session, now=now)
    return KeyView.of(key)


def rotate_key(
    session: Session, key_id: str, *, overlap: timedelta, actor: str, now: datetime, tenant_id: str = ""
) -> CreatedKey:
    """A new secret for the key; the current one keeps working for `overlap` (0: it stops now).
    A secret older than that (a rotation before) stops at once."""
    if not timedelta(0) <= overlap <= MAX_OVERLAP:
        raise InvalidSetting("overlap", "between 0 and 366 days")
    key = get_key(session, key_id, tenant_id=tenant_id, lock=True)
    if key.revoked_at is not None:
        raise ApiKeyRevoked(key_id)
    secret = new_secret()
    key.previous_sha256, key.previous_expires_at = key.key_sha256, now + overlap
    key.key_sha256 = hash_api_key(secret)
    session.flush()
    detail = {"overlap_s": overlap.total_seconds()}
    record(
        session,
        actor=actor,
        action=Action.KEY_ROTATE,
        tenant_id=key.tenant_id,
        key_id=key.id,
        detail=detail,
        now=now,
    )
    bump_revision(session, now=now)
    return CreatedKey(KeyView.of(key), secret)


def update_key(
    session: Session, key_id: str, changes: KeyUpdate, *, actor: str, now: datetime, tenant_id: str = ""
) -> KeyView:
    key = get_key(session, key_id, tenant_id=tenant_id, lock=True)
    if key.revoked_at is not None:
        raise ApiKeyRevoked(key_id)
    current = settings_of(key)
    values: dict[str, Any] = {f.name: getattr(current, f.name) for f in fields(KeySettings)}
    for f in fields(KeyUpdate):
        value = getattr(changes, f.name)
        if f.name != "clear" and value is not None:
            values[f.name] = value
    for name in changes.clear & {
        "input_tokens_per_minute",
        "output_tokens_per_minute",
        "monthly_budget_micros",
    }:
        values[name] = None
    settings = KeySettings(**values)
    for column, value in _columns(settings).items():
        setattr(key, column, value)
    session.flush()
    record(
        session,
        actor=actor,
        action=Action.KEY_UPDATE,
        tenant_id=key.tenant_id,
        key_id=key.id,
        detail=_detail(settings),
        now=now,
    )
    bump_revision(session, now=now)
    return KeyView.of(key)


def touch_keys(session: Session, used: Mapping[str, datetime]) -> None:
    """Moves each key's `last_used_at` forward to when a frontend last saw it (never back); no
    revision bump: nothing a frontend caches changed."""
    for key_id, at in sorted(used.items()):
        session.execute(
            update(ApiKey)
            .where(ApiKey.id == key_id, (ApiKey.last_used_at.is_(None)) | (ApiKey.last_used_at < at))
            .values(last_used_at=at)
        )


def _columns(s: KeySettings) -> dict[str, Any]:
    return {
        "name": s.name,
        "scopes": ",".join(sorted(set(s.scopes), key=SCOPES.index)),
        "expires_at": s.expires_at,
        "input_tokens_per_minute": s.input_tokens_per_minute,
        "output_tokens_per_minute": s.output_tokens_per_minute,
        "monthly_budget_micros": s.monthly_budget_micros,
    }


def _detail(s: KeySettings) -> dict[str, Any]:
    return {k: v for k, v in _columns(s).items() if v not in (None, "")}
