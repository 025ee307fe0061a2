"""The tenant ledger on plain values: a `Charge` per generation and the `TenantLimits` passed in.

The generation rows are created only because reservations reference them (a foreign key); the
ledger never reads them, nor the tenant's stored quotas.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from billing.errors import QuotaExceeded, QuotaKind
from billing.ledger import (
    RATE_WINDOW,
    Charge,
    RateUsage,
    Released,
    TenantLimits,
    TenantLoad,
    rate_usage,
    release_reservation,
    reserve,
    tenant_load,
    window_start,
)
from billing.models import Reservation
from billing.usage import UsageReport, record_usage
from control.generations import create_or_get_generation
from control.states import GenerationState
from datastore.store import Store
from lifecycle.termination import finish
from tests.builders import T0, TENANT, at, new_generation, race_admissions, running, seed

S = GenerationState
LIMITS = TenantLimits(
    max_concurrent_generations=16,
    max_queued_tokens=64_000,
    input_tokens_per_minute=1_000_000,
    output_tokens_per_minute=200_000,
)


def limits(**changes: int) -> TenantLimits:
    return dataclasses.replace(LIMITS, **changes)


def reserved(
    store: Store,
    request_id: str,
    *,
    input_tokens: int = 50,
    output_tokens: int = 200,
    now_s: float = 0,
    quotas: TenantLimits = LIMITS,
    window: timedelta = RATE_WINDOW,
) -> Charge:
    """Reserves a new generation's charge within `quotas` (its row is created first, for the FK)."""
    new = new_generation(request_id, input_tokens=input_tokens, output_tokens=output_tokens)
    charge = Charge(new.generation_id, TENANT, input_tokens, output_tokens)
    with store.transaction() as session:
        create_or_get_generation(session, new, now=at(now_s))
        reserve(session, charge, quotas, now=at(now_s), window=window)
    return charge


def refused(store: Store, request_id: str, **kwargs: Any) -> QuotaExceeded:
    with pytest.raises(QuotaExceeded) as e:
        reserved(store, request_id, **kwargs)
    return e.value


def release(store: Store, charge: Charge, seconds: float) -> Released | None:
    with store.transaction() as session:
        return release_reservation(session, charge, now=at(seconds))


def load(store: Store) -> TenantLoad:
    with store.transaction() as session:
        return tenant_load(session, TENANT)


def rate(store: Store, seconds: float = 0, window: timedelta = RATE_WINDOW) -> RateUsage:
    with store.transaction() as session:
        return rate_usage(session, TENANT, now=at(seconds), window=window)


def reservations(store: Store) -> int:
    with store.transaction() as session:
        return session.scalar(select(func.count()).select_from(Reservation)) or 0


def test_admission_reserves_prompt_plus_max_output(store: Store) -> None:
    seed(store)
    reserved(store, "r1", input_tokens=50, output_tokens=200)
    reserved(store, "r2", input_tokens=7, output_tokens=3, now_s=59)
    assert load(store) == TenantLoad(2, 260)
    assert rate(store, 59) == RateUsage(T0, 57, 203)
    assert rate(store, 60) == RateUsage(at(60), 0, 0)


def test_reserving_twice_charges_once(store: Store) -> None:
    seed(store)
    charge = reserved(store, "r1")
    with store.transaction() as session:
        again = reserve(session, charge, LIMITS, now=at(1))
    assert again.reserved_at == T0
    assert load(store) == TenantLoad(1, 250)
    assert reservations(store) == 1


def test_the_limits_passed_in_apply_not_the_tenants_stored_quotas(store: Store) -> None:
    seed(store)  # the stored tenant allows 16 concurrent generations
    reserved(store, "r1", quotas=limits(max_concurrent_generations=1))
    e = refused(store, "r2", quotas=limits(max_concurrent_generations=1))
    assert (e.tenant_id, e.kind, e.limit, e.in_use) == (TENANT, QuotaKind.CONCURRENT_GENERATIONS, 1, 1)
    reserved(store, "r2")
    assert load(store) == TenantLoad(2, 500)


def test_the_concurrency_quota(store: Store) -> None:
    seed(store)
    two = limits(max_concurrent_generations=2)
    first = reserved(store, "r1", quotas=two)
    reserved(store, "r2", quotas=two)
    e = refused(store, "r3", quotas=two)
    assert (e.kind, e.limit, e.in_use, e.requested, e.retry_after) == (
        QuotaKind.CONCURRENT_GENERATIONS,
        2,
        2,
        1,
        None,
    )
    assert (load(store), rate(store), reservations(store)) == (TenantLoad(2, 500), RateUsage(T0, 100, 400), 2)
    release(store, first, 1)
    reserved(store, "r3", now_s=2, quotas=two)
    assert load(store) == TenantLoad(2, 500)


def test_the_queued_tokens_quota(store: Store) -> None:
    seed(store)
    small = limits(max_queued_tokens=300)
    reserved(store, "r1", input_tokens=50, output_tokens=200, quotas=small)
    e = refused(store, "r2", input_tokens=1, output_tokens=50, quotas=small)
    assert (e.kind, e.limit, e.in_use, e.requested) == (QuotaKind.QUEUED_TOKENS, 300, 250, 51)
    reserved(store, "r3", input_tokens=1, output_tokens=49, quotas=small)
    assert load(store) == TenantLoad(2, 300)


def test_token_rate_budgets_per_window(store: Store) -> None:
    seed(store)
    budget = limits(input_tokens_per_minute=100, output_tokens_per_minute=1000)
    reserved(store, "r1", input_tokens=60, output_tokens=10, now_s=10, quotas=budget)
    e = refused(store, "r2", now_s=45, input_tokens=41, output_tokens=10, quotas=budget)
    assert (e.kind, e.limit, e.in_use, e.requested, e.retry_after) == (
        QuotaKind.INPUT_TOKENS_PER_MINUTE,
        100,
        60,
        41,
        timedelta(seconds=15),
    )
    reserved(store, "r3", input_tokens=40, output_tokens=10, now_s=45, quotas=budget)
    reserved(store, "r2", input_tokens=41, output_tokens=10, now_s=60, quotas=budget)
    assert rate(store, 59) == RateUsage(T0, 100, 20)
    assert rate(store, 60) == RateUsage(at(60), 41, 10)
    e = refused(store, "r4", now_s=61, input_tokens=1, output_tokens=1001, quotas=budget)
    assert (e.kind, e.limit, e.requested, e.retry_after) == (
        QuotaKind.OUTPUT_TOKENS_PER_MINUTE,
        1000,
        1001,
        None,
    )
    assert load(store) == TenantLoad(3, 171)


def test_a_shorter_window_scales_the_per_minute_budget(store: Store) -> None:
    seed(store)
    budget = limits(output_tokens_per_minute=600)
    window = timedelta(seconds=10)  # 100 output tokens per window

    def reserve_in_window(request_id: str, output_tokens: int, seconds: float) -> None:
        reserved(
            store,
            request_id,
            input_tokens=0,
            output_tokens=output_tokens,
            now_s=seconds,
            quotas=budget,
            window=window,
        )

    reserve_in_window("r1", 100, 3)
    with pytest.raises(QuotaExceeded) as e:
        reserve_in_window("r2", 1, 5)
    assert (e.value.kind, e.value.limit, e.value.in_use, e.value.retry_after) == (
        QuotaKind.OUTPUT_TOKENS_PER_MINUTE,
        100,
        100,
        timedelta(seconds=5),
    )
    reserve_in_window("r2", 1, 10)
    with pytest.raises(QuotaExceeded) as e:
        reserve_in_window("r3", 101, 20)
    assert e.value.retry_after is None
    assert window_start(at(13), window) == at(10)
    assert rate(store, 13, window) == RateUsage(at(10), 0, 1)


def test_release_refunds_the_unused_reservation_once(store: Store) -> None:
    seed(store)
    lease = running(store, input_tokens=50, output_tokens=200)
    with store.transaction() as session:
        record_usage(session, [UsageReport(lease.generation_id, 1, 1, 50, 30)], now=at(1))
    finish(store, lease, state=S.COMPLETED, reason="COMPLETED", now=at(2))  # releases it
    assert (load(store), rate(store)) == (TenantLoad(0, 0), RateUsage(T0, 50, 30))
    again = release(store, Charge(lease.generation_id, TENANT, 50, 200), 3)
    assert again is not None
    assert (again.released_at, again.refunded_input_tokens, again.refunded_output_tokens) == (at(2), 0, 170)
    assert (load(store), rate(store)) == (TenantLoad(0, 0), RateUsage(T0, 50, 30))


def test_a_generation_that_billed_nothing_is_refunded_everything(store: Store) -> None:
    seed(store)
    charge = reserved(store, "r1", input_tokens=50, output_tokens=200)
    released = release(store, charge, 1)
    assert released is not None
    assert (released.released_at, released.refunded_input_tokens, released.refunded_output_tokens) == (
        at(1),
        50,
        200,
    )
    assert (load(store), rate(store)) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))


def test_releasing_an_unreserved_generation_is_a_no_op(store: Store) -> None:
    seed(store)
    assert release(store, Charge("g-none", TENANT, 50, 200), 1) is None
    assert load(store) == TenantLoad(0, 0)


def test_concurrent_admissions_never_overshoot_a_quota(store: Store) -> None:
    seed(store)
    three = limits(max_concurrent_generations=3)
    outcomes = race_admissions(6, lambda i: reserved(store, f"r{i}", quotas=three))
    assert outcomes == ["CONCURRENT_GENERATIONS"] * 3 + ["admitted"] * 3
    assert load(store) == TenantLoad(3, 750)
    assert reservations(store) == 3
