from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from billing.errors import QuotaExceeded, QuotaKind
from billing.ledger import (
    RateUsage,
    TenantLoad,
    rate_usage,
    release_reservation,
    reserve,
    tenant_load,
    window_start,
)
from billing.models import Reservation
from billing.usage import UsageReport, record_usage
from control.generations import create_or_get_generation, get_generation
from control.states import GenerationState
from control.termination import finish_attempt, finish_queued
from datastore.store import Store
from tests.builders import T0, TENANT, admit, admitted, at, new_generation, running, seed, tenant_spec

S = GenerationState


def load(store: Store) -> TenantLoad:
    with store.transaction() as session:
        return tenant_load(session, TENANT)


def rate(store: Store, seconds: float = 0, window: timedelta = timedelta(minutes=1)) -> RateUsage:
    with store.transaction() as session:
        return rate_usage(session, TENANT, now=at(seconds), window=window)


def reservations(store: Store) -> int:
    with store.transaction() as session:
        return session.scalar(select(func.count()).select_from(Reservation)) or 0


def refused(
    store: Store, request_id: str, *, now_s: float = 0, input_tokens: int = 50, output_tokens: int = 200
) -> QuotaExceeded:
    new = new_generation(request_id, input_tokens=input_tokens, output_tokens=output_tokens)
    with pytest.raises(QuotaExceeded) as e, store.transaction() as session:
        admit(session, new, now=at(now_s))
    return e.value


def test_admission_reserves_prompt_plus_max_output(store: Store) -> None:
    seed(store)
    admitted(store, "r1", input_tokens=50, output_tokens=200)
    admitted(store, "r2", input_tokens=7, output_tokens=3, now=at(59))
    assert load(store) == TenantLoad(2, 260)
    assert rate(store, 59) == RateUsage(T0, 57, 203)
    assert rate(store, 60) == RateUsage(at(60), 0, 0)


def test_reserving_twice_charges_once(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    with store.transaction() as session:
        reserve(session, get_generation(session, TENANT, generation_id), now=at(1))
    assert load(store) == TenantLoad(1, 250)
    assert reservations(store) == 1


def test_the_concurrency_quota(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=2))
    lease = running(store, "r1")
    admitted(store, "r2")
    e = refused(store, "r3")
    assert (e.kind, e.limit, e.in_use, e.requested, e.retry_after) == (
        QuotaKind.CONCURRENT_GENERATIONS,
        2,
        2,
        1,
        None,
    )
    assert (load(store), rate(store), reservations(store)) == (TenantLoad(2, 500), RateUsage(T0, 100, 400), 2)
    with store.transaction() as session:
        finish_attempt(session, lease, state=S.COMPLETED, reason="COMPLETED", now=at(1))
    admitted(store, "r3", now=at(2))
    assert load(store) == TenantLoad(2, 500)


def test_the_queued_tokens_quota(store: Store) -> None:
    seed(store, tenant_spec(max_queued_tokens=300))
    admitted(store, "r1", input_tokens=50, output_tokens=200)
    e = refused(store, "r2", input_tokens=1, output_tokens=50)
    assert (e.kind, e.limit, e.in_use, e.requested) == (QuotaKind.QUEUED_TOKENS, 300, 250, 51)
    admitted(store, "r3", input_tokens=1, output_tokens=49)
    assert load(store) == TenantLoad(2, 300)


def test_token_rate_budgets_per_window(store: Store) -> None:
    seed(store, tenant_spec(input_tokens_per_minute=100, output_tokens_per_minute=1000))
    admitted(store, "r1", input_tokens=60, output_tokens=10, now=at(10))
    e = refused(store, "r2", now_s=45, input_tokens=41, output_tokens=10)
    assert (e.kind, e.limit, e.in_use, e.requested, e.retry_after) == (
        QuotaKind.INPUT_TOKENS_PER_MINUTE,
        100,
        60,
        41,
        timedelta(seconds=15),
    )
    admitted(store, "r3", input_tokens=40, output_tokens=10, now=at(45))
    admitted(store, "r2", input_tokens=41, output_tokens=10, now=at(60))
    assert rate(store, 59) == RateUsage(T0, 100, 20)
    assert rate(store, 60) == RateUsage(at(60), 41, 10)
    e = refused(store, "r4", now_s=61, input_tokens=1, output_tokens=1001)
    assert (e.kind, e.limit, e.requested, e.retry_after) == (
        QuotaKind.OUTPUT_TOKENS_PER_MINUTE,
        1000,
        1001,
        None,
    )
    assert load(store) == TenantLoad(3, 171)


def test_a_shorter_window_scales_the_per_minute_budget(store: Store) -> None:
    seed(store, tenant_spec(output_tokens_per_minute=600))
    window = timedelta(seconds=10)  # 100 output tokens per window

    def reserve_in_window(request_id: str, output_tokens: int, seconds: float) -> None:
        with store.transaction() as session:
            new = new_generation(request_id, input_tokens=0, output_tokens=output_tokens)
            reserve(
                session,
                create_or_get_generation(session, new, now=at(seconds)).generation,
                now=at(seconds),
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
        finish_attempt(session, lease, state=S.COMPLETED, reason="COMPLETED", now=at(2))
    assert (load(store), rate(store)) == (TenantLoad(0, 0), RateUsage(T0, 50, 30))
    with store.transaction() as session:
        again = release_reservation(session, get_generation(session, TENANT, lease.generation_id), now=at(3))
    assert again is not None
    assert (again.released_at, again.refunded_input_tokens, again.refunded_output_tokens) == (at(2), 0, 170)
    assert (load(store), rate(store)) == (TenantLoad(0, 0), RateUsage(T0, 50, 30))


def test_a_queued_generation_that_never_ran_refunds_everything(store: Store) -> None:
    seed(store)
    generation_id = admitted(store, input_tokens=50, output_tokens=200)
    with store.transaction() as session:
        finish_queued(session, generation_id, state=S.CANCELED, reason="CANCELED", now=at(1))
    assert (load(store), rate(store)) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))


def test_concurrent_admissions_never_overshoot_a_quota(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=3))
    start = threading.Barrier(6)
    outcomes: list[str] = []

    def run(i: int) -> None:
        start.wait()
        try:
            with store.transaction() as session:
                admit(session, new_generation(f"r{i}"), now=T0)
            outcomes.append("admitted")
        except QuotaExceeded as e:
            outcomes.append(str(e.kind))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["CONCURRENT_GENERATIONS"] * 3 + ["admitted"] * 3
    assert load(store) == TenantLoad(3, 750)
    assert reservations(store) == 3
