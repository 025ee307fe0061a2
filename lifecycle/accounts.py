"""Tenants and keys with their money (control's accounts beside billing's month of spend), and
prices set by the name operators use (an alias, or a version id).

Each function runs one transaction and returns values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from billing.budgets import MonthSpend, key_subject, month_spend, tenant_subject
from billing.prices import Price, Rates, list_prices
from billing.prices import set_price as record_price
from control.api_keys import KeyView, list_keys
from control.errors import UnknownModelVersion
from control.model_versions import alias_routes
from control.models import ModelVersion
from control.tenants import TenantView, get_tenant, list_tenants
from datastore.store import Store


@dataclass(slots=True, frozen=True)
class TenantAccount:
    tenant: TenantView
    month: MonthSpend  # this month's reserved and spent money


@dataclass(slots=True, frozen=True)
class KeyAccount:
    key: KeyView
    month: MonthSpend


def tenant_accounts(store: Store, *, now: datetime, tenant_id: str = "") -> list[TenantAccount]:
    """Every tenant (or the one named: `TenantNotFound` if none) with its spend this month."""
    with store.transaction() as session:
        tenants = [get_tenant(session, tenant_id)] if tenant_id else list_tenants(session)
        return [TenantAccount(t, month_spend(session, tenant_subject(t.id), now=now)) for t in tenants]


def key_accounts(store: Store, tenant_id: str, *, now: datetime) -> list[KeyAccount]:
    """The tenant's keys (revoked ones too) with their spend this month (`TenantNotFound` if none)."""
    with store.transaction() as session:
        get_tenant(session, tenant_id)
        return [
            KeyAccount(k, month_spend(session, key_subject(k.id), now=now))
            for k in list_keys(session, tenant_id)
        ]


def set_price(
    store: Store, model: str, rates: Rates, *, effective_at: datetime, actor: str, now: datetime
) -> list[Price]:
    """Prices `model`: a version id, or an alias (every version its route names now). Raises
    control's `UnknownModelVersion` when it names neither."""
    with store.transaction() as session:
        versions = sorted(alias_routes(session, model))
        if not versions:
            if session.get(ModelVersion, model) is None:
                raise UnknownModelVersion(model)
            versions = [model]
        return [
            record_price(session, v, rates, effective_at=effective_at, actor=actor, now=now) for v in versions
        ]


def prices(store: Store, model_version_id: str = "") -> list[Price]:
    """The recorded prices (of one version), newest effective first."""
    with store.transaction() as session:
        return list_prices(session, model_version_id)
