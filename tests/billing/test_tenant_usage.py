from __future__ import annotations

import pytest

from billing.tenant_usage import GenerationUsage, TenantUsage, generation_usage, usage_by_tenant
from billing.usage import UsageCounts, UsageReport, record_usage
from control.attempts import start_attempt
from control.states import GenerationState
from control.termination import WORKER_LOST, finish_attempt, interrupt_attempt
from datastore.store import Store
from tests.builders import LEASE, at, running, seed, tenant_spec

S = GenerationState


def usage(store: Store, tenant_id: str, start_s: float, end_s: float) -> TenantUsage:
    with store.transaction() as session:
        return usage_by_tenant(session, tenant_id, start=at(start_s), end=at(end_s))


def report(store: Store, generation_id: str, epoch: int, seq: int, i: int, o: int, c: int = 0) -> None:
    with store.transaction() as session:
        record_usage(session, [UsageReport(generation_id, epoch, seq, i, o, c)], now=at(0))


def test_usage_by_tenant_and_window(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    done = running(store, "r1", tenant_id="a", now=at(10))
    crashed = running(store, "r2", tenant_id="a", now=at(70))
    live = running(store, "r3", tenant_id="a", now=at(80))
    other = running(store, "r4", tenant_id="b", now=at(10))
    report(store, done.generation_id, 1, 1, 100, 40, 64)
    report(store, crashed.generation_id, 1, 1, 30, 12)
    report(store, live.generation_id, 1, 1, 20, 5)
    report(store, other.generation_id, 1, 1, 999, 999)
    with store.transaction() as session:
        finish_attempt(session, done, state=S.COMPLETED, reason="COMPLETED", now=at(20))
        interrupt_attempt(session, crashed.generation_id, 1, reason=WORKER_LOST, now=at(90))
    report(store, crashed.generation_id, 1, 2, 30, 19)  # after the seal: the crash tail
    report(store, done.generation_id, 1, 2, 100, 41, 64)  # late, after a normal seal

    first_minute = usage(store, "a", 0, 60)
    second_minute = usage(store, "a", 60, 120)
    assert first_minute == TenantUsage(
        "a", at(0), at(60), UsageCounts(100, 40, 64), UsageCounts(), UsageCounts(), generations=1
    )
    assert second_minute == TenantUsage(
        "a",
        at(60),
        at(120),
        recorded=UsageCounts(50, 17),
        interrupted=UsageCounts(30, 12),
        unbilled=UsageCounts(0, 7),
        generations=2,
    )
    assert usage(store, "a", 0, 120).recorded == UsageCounts(150, 57, 64)
    assert usage(store, "b", 0, 120).recorded == UsageCounts(999, 999)
    assert usage(store, "a", 120, 180) == TenantUsage(
        "a", at(120), at(180), UsageCounts(), UsageCounts(), UsageCounts(), generations=0
    )
    with pytest.raises(ValueError, match="after it starts"), store.transaction() as session:
        usage_by_tenant(session, "a", start=at(60), end=at(60))


def test_generation_usage_sums_attempts_and_is_final_once_all_are_sealed(store: Store) -> None:
    seed(store)
    first = running(store)
    g = first.generation_id
    report(store, g, 1, 1, 50, 0)
    with store.transaction() as session:
        second = start_attempt(session, g, worker_id="w2", now=at(31), lease_for=LEASE)
    report(store, g, 2, 1, 50, 8)
    with store.transaction() as session:
        assert generation_usage(session, g) == GenerationUsage(g, UsageCounts(100, 8), final=False)
        finish_attempt(session, second, state=S.COMPLETED, reason="COMPLETED", now=at(40))
    with store.transaction() as session:
        assert generation_usage(session, g) == GenerationUsage(g, UsageCounts(100, 8), final=True)
        assert generation_usage(session, "nope") == GenerationUsage("nope", UsageCounts(), final=False)
