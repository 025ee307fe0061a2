"""Prices, budgets, keys and usage export through the lifecycle: admission pins the price and
reserves the maximum cost in the month's budgets (tenant and key), the end of a generation turns
it into the spend of its sealed usage, and the export's sums are the sealed watermarks'."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from billing.budgets import MonthSpend, key_subject, month_spend, month_start, tenant_subject
from billing.errors import BudgetExceeded, QuotaExceeded, QuotaKind
from billing.ledger import rate_usage
from billing.models import Reservation, Watermark
from billing.prices import Rates
from billing.usage import UsageCounts, UsageReport, record_usage
from control.api_keys import KeySettings, create_key, revoke_key
from control.errors import ApiKeyNotValid, TenantDisabled, UnknownModelVersion
from control.models import ApiKey, Generation
from control.states import GenerationState
from control.tenants import TenantUpdate, set_tenant_disabled, update_tenant
from datastore.store import Store
from lifecycle.accounts import key_accounts, prices, set_price, tenant_accounts
from lifecycle.admission import admit
from lifecycle.attempts import start_attempt
from lifecycle.reads import usage_by_tenant
from lifecycle.termination import finish
from lifecycle.usage_export import usage_export
from tests.builders import T0, TENANT, VERSION_ID, at, new_generation, on, race_admissions, seed

RATES = Rates(
    input_per_mtok=2_000_000, cached_input_per_mtok=1_000_000, output_per_mtok=8_000_000
)  # $2/$1/$8
DONE = GenerationState.COMPLETED


def priced(store: Store, *, tenant_budget: int | None = None) -> str:
    """The default version priced at RATES, the tenant with a budget; returns its config key's id."""
    seed(store)
    set_price(store, VERSION_ID, RATES, effective_at=T0, actor="ann", now=T0)
    with store.transaction() as session:
        if tenant_budget is not None:
            update_tenant(
                session, TENANT, TenantUpdate(monthly_budget_micros=tenant_budget), actor="ann", now=T0
            )
        return session.scalars(select(ApiKey.id).where(ApiKey.tenant_id == TENANT)).one()


def run(store: Store, request_id: str, key_id: str | None, usage: UsageCounts, *, now_s: float = 0) -> str:
    """Admits, runs and finishes a generation (50 prompt tokens, 200 max output) billed `usage`."""
    new = replace(new_generation(request_id), api_key_id=key_id)
    admit(store, new, now=at(now_s))
    lease = start_attempt(store, new.generation_id, on(), now=at(now_s))
    with store.transaction() as session:
        report = UsageReport(
            new.generation_id, 1, 1, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens
        )
        record_usage(session, [report], now=at(now_s))
    finish(store, lease, state=DONE, reason="COMPLETED", now=at(now_s + 1))
    return new.generation_id


def spend(store: Store, subject: str) -> MonthSpend:
    with store.transaction() as session:
        return month_spend(session, subject, now=T0)


def test_admission_pins_the_price_and_reserves_the_maximum_cost_then_bills_the_usage(store: Store) -> None:
    key_id = priced(store)
    new = replace(new_generation("r1"), api_key_id=key_id)
    admit(store, new, now=T0)
    # 50 prompt tokens at $2/M + 200 output tokens at $8/M = 100 + 1,600 µ$
    period = month_start(T0)
    assert spend(store, tenant_subject(TENANT)) == MonthSpend(period, 1700, 0)
    assert spend(store, key_subject(key_id)) == MonthSpend(period, 1700, 0)
    set_price(store, VERSION_ID, Rates(1, 1, 1), effective_at=at(1), actor="bob", now=at(1))  # not for it
    lease = start_attempt(store, new.generation_id, on(), now=at(1))
    with store.transaction() as session:
        record_usage(session, [UsageReport(new.generation_id, 1, 1, 50, 20, 10)], now=at(2))
    finish(store, lease, state=DONE, reason="COMPLETED", now=at(3))
    # 40 uncached x 2 + 10 cached x 1 + 20 output x 8 = 80 + 10 + 160 µ$
    assert spend(store, tenant_subject(TENANT)) == MonthSpend(period, 0, 250)
    assert spend(store, key_subject(key_id)) == MonthSpend(period, 0, 250)
    with store.transaction() as session:
        reservation = session.get(Reservation, new.generation_id)
        assert reservation is not None
        assert (reservation.reserved_micros, reservation.spent_micros, reservation.input_per_mtok) == (
            1700,
            250,
            2_000_000,
        )
    usage = usage_by_tenant(store, TENANT, start=T0, end=at(60))
    assert (usage.recorded, usage.spent_micros) == (UsageCounts(50, 20, 10), 250)


def test_a_request_that_would_pass_the_budget_is_refused_and_nothing_is_recorded(store: Store) -> None:
    key_id = priced(store, tenant_budget=3000)
    admit(store, replace(new_generation("r1"), api_key_id=key_id), now=T0)  # 1,700 reserved
    with pytest.raises(BudgetExceeded) as refused:
        admit(store, replace(new_generation("r2"), api_key_id=key_id), now=T0)
    e = refused.value
    assert (e.subject, e.budget_micros, e.spent_micros, e.reserved_micros, e.requested_micros) == (
        "tenant:acme",
        3000,
        0,
        1700,
        1700,
    )
    assert e.period_end == T0.replace(month=2, day=1, hour=0)
    with store.transaction() as session:
        assert session.scalar(select(func.count()).select_from(Generation)) == 1
    assert spend(store, tenant_subject(TENANT)).reserved_micros == 1700
    assert spend(store, key_subject(key_id)).reserved_micros == 1700  # the key's charge rolled back too


def test_a_key_budget_binds_that_key_only(store: Store) -> None:
    priced(store)
    with store.transaction() as session:
        small = create_key(
            session, TENANT, KeySettings(monthly_budget_micros=2000), actor="ann", now=T0
        ).key.id
        other = create_key(session, TENANT, KeySettings(), actor="ann", now=T0).key.id
    run(store, "r1", small, UsageCounts(50, 200, 0))  # spends all 1,700 of its maximum
    with pytest.raises(BudgetExceeded) as refused:
        admit(store, replace(new_generation("r2"), api_key_id=small), now=at(5))
    assert (refused.value.subject, refused.value.spent_micros) == (f"key:{small}", 1700)
    admit(store, replace(new_generation("r3"), api_key_id=other), now=at(5))


def test_concurrent_admissions_never_pass_a_budget_together(store: Store) -> None:
    key_id = priced(store, tenant_budget=5 * 1700)

    def admit_one(i: int) -> None:
        try:
            admit(store, replace(new_generation(f"c{i}"), api_key_id=key_id), now=T0)
        except BudgetExceeded as e:
            raise QuotaExceeded(TENANT, QuotaKind.QUEUED_TOKENS, 0, 0, 0, None) from e  # counted as refused

    outcomes = race_admissions(8, admit_one)
    assert outcomes.count("admitted") == 5
    assert spend(store, tenant_subject(TENANT)).reserved_micros == 5 * 1700


def test_a_key_s_own_rate_limit_refuses_beside_the_tenant_s(store: Store) -> None:
    seed(store)
    with store.transaction() as session:
        limits = KeySettings(output_tokens_per_minute=300)
        key_id = create_key(session, TENANT, limits, actor="ann", now=T0).key.id
    admit(store, replace(new_generation("r1"), api_key_id=key_id), now=T0)  # 200 of 300
    with pytest.raises(QuotaExceeded) as refused:
        admit(store, replace(new_generation("r2"), api_key_id=key_id), now=T0)
    assert (refused.value.kind, refused.value.in_use, refused.value.retry_after) == (
        QuotaKind.KEY_OUTPUT_TOKENS_PER_MINUTE,
        200,
        timedelta(minutes=1),
    )
    with store.transaction() as session:
        assert rate_usage(session, TENANT, now=T0, key_id=key_id).output_tokens == 200
    admit(store, new_generation("r3"), now=T0)  # without that key, the tenant's own limits only


def test_a_disabled_tenant_and_a_revoked_key_admit_nothing_at_once(store: Store) -> None:
    seed(store)
    with store.transaction() as session:
        key_id = create_key(session, TENANT, KeySettings(), actor="ann", now=T0).key.id
        revoke_key(session, key_id, actor="ann", now=T0)
    with pytest.raises(ApiKeyNotValid):
        admit(store, replace(new_generation("r1"), api_key_id=key_id), now=T0)
    with store.transaction() as session:
        expiring = create_key(session, TENANT, KeySettings(expires_at=at(10)), actor="ann", now=T0).key.id
    admit(store, replace(new_generation("r2"), api_key_id=expiring), now=at(9))
    with pytest.raises(ApiKeyNotValid):
        admit(store, replace(new_generation("r3"), api_key_id=expiring), now=at(10))
    with store.transaction() as session:
        set_tenant_disabled(session, TENANT, True, actor="ann", now=at(11))
    with pytest.raises(TenantDisabled):
        admit(store, new_generation("r4"), now=at(12))
    again = admit(store, replace(new_generation("r2"), api_key_id=expiring), now=at(12))
    assert not again.created  # a retry of a recorded request re-attaches, disabled or not


def test_the_export_sums_are_the_sealed_watermarks(store: Store) -> None:
    key_id = priced(store)
    with store.transaction() as session:
        second = create_key(session, TENANT, KeySettings(), actor="ann", now=T0).key.id
    run(store, "a", key_id, UsageCounts(50, 20, 10))
    run(store, "b", key_id, UsageCounts(40, 7, 0), now_s=60)
    run(store, "c", second, UsageCounts(30, 200, 30))
    run(store, "d", key_id, UsageCounts(50, 5, 0), now_s=86_400)  # the next day
    live = replace(new_generation("e"), api_key_id=key_id)
    admit(store, live, now=T0)
    start_attempt(store, live.generation_id, on(), now=T0)  # running: not sealed, not exported
    rows = usage_export(store, start=T0.replace(hour=0), end=at(2 * 86_400))
    day = T0.replace(hour=0)
    exported = [
        (r.period_start, r.api_key_id, r.input_tokens, r.cached_input_tokens, r.output_tokens, r.requests)
        for r in rows
    ]
    expected = [
        (day, key_id, 90, 10, 27, 2),
        (day, second, 30, 30, 200, 1),
        (day + timedelta(days=1), key_id, 50, 0, 5, 1),
    ]
    assert exported == sorted(expected, key=lambda r: (r[0], r[1]))
    with store.transaction() as session:
        sealed = session.execute(
            select(func.sum(Watermark.input_tokens), func.sum(Watermark.output_tokens)).where(
                Watermark.sealed_at.is_not(None)
            )
        ).one()
        spent = session.scalar(select(func.sum(Reservation.spent_micros)))
    assert (sum(r.input_tokens for r in rows), sum(r.output_tokens for r in rows)) == tuple(sealed)
    assert sum(r.spent_micros for r in rows) == spent == spend(store, tenant_subject(TENANT)).spent_micros
    hours = usage_export(store, start=T0, end=at(3600), tenant_id=TENANT, bucket="hour")
    assert {(r.period_start, r.api_key_id, r.requests) for r in hours} == {(T0, key_id, 2), (T0, second, 1)}
    assert usage_export(store, start=T0, end=at(2 * 86_400), tenant_id="other") == []


def test_accounts_show_this_month_and_prices_are_set_by_alias_or_version(store: Store) -> None:
    key_id = priced(store, tenant_budget=10**6)
    run(store, "a", key_id, UsageCounts(50, 20, 10))
    (account,) = tenant_accounts(store, now=T0)
    assert (account.tenant.id, account.tenant.settings.monthly_budget_micros) == (TENANT, 10**6)
    assert account.month.spent_micros == 250
    (key,) = key_accounts(store, TENANT, now=T0)
    assert (key.key.id, key.month.spent_micros) == (key_id, 250)
    with pytest.raises(UnknownModelVersion):
        set_price(store, "nothing", RATES, effective_at=T0, actor="ann", now=T0)
    assert [p.rates for p in prices(store, VERSION_ID)] == [RATES]
