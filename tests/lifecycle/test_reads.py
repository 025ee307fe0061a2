from __future__ import annotations

import pytest

from billing.totals import GenerationUsage
from billing.usage import UsageCounts, UsageReport, record_usage
from control.errors import GenerationNotFound
from control.states import GenerationState
from control.termination import WORKER_LOST
from datastore.store import Store
from lifecycle.reads import (
    GenerationRecord,
    TenantUsage,
    get_generation,
    get_generation_by_request,
    usage_by_tenant,
)
from lifecycle.termination import finish, interrupt
from tests.builders import TENANT, VERSION_ID, admitted, at, running, seed, tenant_spec

S = GenerationState


def usage(store: Store, tenant_id: str, start_s: float, end_s: float) -> TenantUsage:
    return usage_by_tenant(store, tenant_id, start=at(start_s), end=at(end_s))


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
    finish(store, done, state=S.COMPLETED, reason="COMPLETED", now=at(20))
    interrupt(store, crashed.generation_id, 1, reason=WORKER_LOST, now=at(90))
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
    with pytest.raises(ValueError, match="after it starts"):
        usage_by_tenant(store, "a", start=at(60), end=at(60))


def test_a_generation_is_read_with_its_bill_by_id_or_request_id(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    lease = running(store, "r1", tenant_id="a")
    g = lease.generation_id
    report(store, g, 1, 1, 50, 12, 16)
    finish(store, lease, state=S.COMPLETED, reason="OUTPUT_LIMIT", now=at(5))
    expected = GenerationRecord(
        generation_id=g,
        request_id="r1",
        state=S.COMPLETED,
        model_version_id=VERSION_ID,
        terminal_reason="OUTPUT_LIMIT",
        epoch=1,
        usage=GenerationUsage(g, UsageCounts(50, 12, 16), final=True),
    )
    assert get_generation(store, "a", g) == expected
    assert get_generation_by_request(store, "a", "r1") == expected


def test_a_queued_generation_has_no_epoch_and_no_bill(store: Store) -> None:
    seed(store)
    g = admitted(store, "r1")
    record = get_generation(store, TENANT, g)
    assert (record.state, record.epoch, record.terminal_reason) == (S.QUEUED, None, None)
    assert record.usage == GenerationUsage(g, UsageCounts(), final=False)


def test_other_tenants_and_unknown_keys_are_not_found(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    g = admitted(store, "r1", tenant_id="a")
    for read in (
        lambda: get_generation(store, "b", g),
        lambda: get_generation(store, "a", "nope"),
        lambda: get_generation_by_request(store, "b", "r1"),
        lambda: get_generation_by_request(store, "a", "r2"),
    ):
        with pytest.raises(GenerationNotFound):
            read()
