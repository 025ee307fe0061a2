"""What admission charges a request against, read in its transaction by one statement: the tenant's
quotas, budget and disabled flag, the admitting key's state and own limits, and the price in effect
for the pinned version. Reading them in the admission's own transaction makes a disable or a
revocation stop new generations at once on every frontend, whatever their caches hold."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import String, and_, bindparam, select
from sqlalchemy.orm import Session

from billing.ledger import KeyLimits, TenantLimits
from billing.models import ModelPrice
from billing.prices import FREE, Rates
from control.models import ApiKey, Tenant


@dataclass(slots=True, frozen=True)
class Terms:
    limits: TenantLimits
    disabled: bool  # the tenant starts no new generation
    key_limits: KeyLimits
    key_valid: bool  # the key exists, is the tenant's, unrevoked and unexpired (no key asked: True)
    rates: Rates  # the version's price now (FREE: none)


def read_terms(
    session: Session, tenant_id: str, key_id: str | None, version_id: str, *, now: datetime
) -> Terms | None:
    """The terms of a request by `key_id` of `tenant_id` for `version_id`; None for an unknown tenant."""
    params = {"tenant": tenant_id, "key": key_id or "", "version": version_id, "now": now}
    row = session.connection().execute(_TERMS, params).one_or_none()
    if row is None:
        return None
    (live, queued, tpm_in, tpm_out, budget, disabled_at, found_key, revoked_at, expires_at, *rest) = row
    key_in, key_out, key_budget, rate_in, rate_cached, rate_out = rest
    key_valid = key_id is None or (
        found_key is not None and revoked_at is None and (expires_at is None or expires_at > now)
    )
    return Terms(
        TenantLimits(live, queued, tpm_in, tpm_out, budget),
        disabled_at is not None,
        KeyLimits(key_in, key_out, key_budget),
        key_valid,
        FREE if rate_in is None else Rates(rate_in, rate_cached, rate_out),
    )


_PRICE_NOW = (  # the id of the version's price row in effect now
    select(ModelPrice.id)
    .where(
        ModelPrice.model_version_id == bindparam("version", type_=String()),
        ModelPrice.effective_at <= bindparam("now", type_=ModelPrice.effective_at.type),
    )
    .order_by(ModelPrice.effective_at.desc(), ModelPrice.id.desc())
    .limit(1)
    .scalar_subquery()
)
# built once: every admission reads it
_TERMS = (
    select(
        Tenant.max_concurrent_generations,
        Tenant.max_queued_tokens,
        Tenant.input_tokens_per_minute,
        Tenant.output_tokens_per_minute,
        Tenant.monthly_budget_micros,
        Tenant.disabled_at,
        ApiKey.id,
        ApiKey.revoked_at,
        ApiKey.expires_at,
        ApiKey.input_tokens_per_minute,
        ApiKey.output_tokens_per_minute,
        ApiKey.monthly_budget_micros,
        ModelPrice.input_per_mtok,
        ModelPrice.cached_input_per_mtok,
        ModelPrice.output_per_mtok,
    )
    .select_from(Tenant)
    .outerjoin(ApiKey, and_(ApiKey.id == bindparam("key", type_=String()), ApiKey.tenant_id == Tenant.id))
    .outerjoin(ModelPrice, ModelPrice.id == _PRICE_NOW)
    .where(Tenant.id == bindparam("tenant", type_=String()))
)
