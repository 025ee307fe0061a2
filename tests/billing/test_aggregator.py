from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from billing.aggregator import AggregatorStats, UsageAggregator
from billing.errors import UsageNotDurable
from billing.usage import UsageCounts, UsageReport, read_watermark
from datastore.store import Store
from tests.builders import at, running, seed, tenant_spec
from tests.datastore.stores import empty_engine


async def test_reports_are_written_in_batches_not_one_by_one(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=100))
    ids = [running(store, f"r{i}").generation_id for i in range(10)]
    async with UsageAggregator(store.sessions, clock=lambda: at(1)) as agg:
        for seq in range(1, 51):
            for g in ids:
                agg.report(UsageReport(g, 1, seq, 40, seq * 2))
        marks = [await agg.flush_final(g, 1) for g in ids]
    assert [m.billable if m else None for m in marks] == [UsageCounts(40, 100)] * 10
    assert agg.stats == AggregatorStats(reports=500, recorded=500, batches=1)


async def test_flush_waits_for_every_earlier_report_of_concurrent_producers(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=100))
    ids = [running(store, f"r{i}").generation_id for i in range(20)]

    async def produce(agg: UsageAggregator, g: str) -> UsageCounts | None:
        for seq in range(1, 21):
            agg.report(UsageReport(g, 1, seq, 10, seq))
            await asyncio.sleep(0)
        mark = await agg.flush_final(g, 1)
        return mark.billable if mark else None

    async with UsageAggregator(store.sessions, clock=lambda: at(1), max_batch=64) as agg:
        results = await asyncio.gather(*(produce(agg, g) for g in ids))
    assert results == [UsageCounts(10, 20)] * 20
    assert agg.stats.recorded == 400
    assert 7 <= agg.stats.batches < 400


async def test_unknown_attempts_flush_to_none(store: Store) -> None:
    seed(store)
    async with UsageAggregator(store.sessions, clock=lambda: at(1)) as agg:
        agg.report(UsageReport("nope", 1, 1, 1, 1))
        assert await agg.flush_final("nope", 1) is None
    assert (agg.stats.reports, agg.stats.unknown, agg.stats.recorded) == (1, 1, 0)


async def test_close_writes_what_is_queued(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    agg = UsageAggregator(store.sessions, clock=lambda: at(1), linger_s=10.0)
    agg.start()
    agg.report(UsageReport(g, 1, 1, 50, 9))
    assert await agg.close() == 0
    with store.transaction() as session:
        view = read_watermark(session, g, 1)
    assert view is not None and view.billable == UsageCounts(50, 9)
    with pytest.raises(RuntimeError, match="closed"):
        agg.report(UsageReport(g, 1, 2, 50, 10))
    with pytest.raises(RuntimeError, match="not running"):
        await agg.flush_final(g, 1)


async def test_a_failed_write_fails_the_flush_and_keeps_the_reports(backend: str, tmp_path: Path) -> None:
    with empty_engine(backend, tmp_path) as engine:  # no tables: every write fails
        agg = UsageAggregator(sessionmaker(engine), clock=lambda: at(1), retry_delay_s=0.01)
        agg.start()
        agg.report(UsageReport("g", 1, 1, 5, 5))
        with pytest.raises(UsageNotDurable) as e:
            await agg.flush_final("g", 1)
        assert (e.value.generation_id, e.value.epoch) == ("g", 1)
        assert await agg.close() == 1
        assert agg.stats.failures >= 1 and agg.stats.batches == 0


def test_invalid_options_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        UsageAggregator(store.sessions, clock=lambda: at(1), max_batch=0)
    with pytest.raises(ValueError, match="max_pending"):
        UsageAggregator(store.sessions, clock=lambda: at(1), max_pending=0)


class GatedSessions:
    """The store's sessions behind a switch: while `down`, every transaction fails to connect."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.down = False

    def begin(self) -> Any:
        if self.down:
            raise OperationalError("BEGIN", {}, ConnectionRefusedError("store down"))
        return self.store.sessions.begin()


def gated(store: Store, **options: Any) -> tuple[UsageAggregator, GatedSessions]:
    gate = GatedSessions(store)
    sessions = cast(sessionmaker[Session], gate)
    return UsageAggregator(sessions, clock=lambda: at(1), retry_delay_s=0.01, **options), gate


def billable(store: Store, generation_id: str) -> UsageCounts | None:
    with store.transaction() as session:
        view = read_watermark(session, generation_id, 1)
    return view.billable if view else None


async def test_reports_wait_out_a_store_outage_and_are_written_after_it(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    agg, gate = gated(store)
    agg.start()
    gate.down = True
    for seq in range(1, 4):
        agg.report(UsageReport(g, 1, seq, 7, seq))
    with pytest.raises(UsageNotDurable):
        await agg.flush_final(g, 1)
    assert agg.pending == 3 and billable(store, g) == UsageCounts(0, 0)
    gate.down = False
    mark = await agg.flush_final(g, 1)
    assert mark is not None and mark.billable == UsageCounts(7, 3)
    assert await agg.close() == 0
    assert (agg.stats.recorded, agg.stats.dropped) == (3, 0) and agg.stats.failures >= 1


async def test_a_full_queue_keeps_the_newest_report_of_each_attempt(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=10))
    a, b = running(store, "a").generation_id, running(store, "b").generation_id
    agg, gate = gated(store, max_pending=3)
    agg.start()
    gate.down = True
    for seq in range(1, 6):  # cumulative: the newest carries everything the others did
        agg.report(UsageReport(a, 1, seq, 10, seq * 2))
    agg.report(UsageReport(b, 1, 1, 4, 1))
    assert agg.pending <= 3 and agg.stats.compacted >= 3 and agg.stats.dropped == 0
    gate.down = False
    mark_a, mark_b = await agg.flush_final(a, 1), await agg.flush_final(b, 1)
    assert mark_a is not None and mark_a.billable == UsageCounts(10, 10)
    assert mark_b is not None and mark_b.billable == UsageCounts(4, 1)
    await agg.close()


async def test_more_attempts_waiting_than_the_bound_drop_the_oldest_reports(store: Store) -> None:
    seed(store, tenant_spec(max_concurrent_generations=10))
    ids = [running(store, f"r{i}").generation_id for i in range(3)]
    agg, gate = gated(store, max_pending=2)
    agg.start()
    gate.down = True
    for g in ids:
        agg.report(UsageReport(g, 1, 1, 5, 5))
    assert agg.stats.dropped == 1 and agg.pending == 2
    gate.down = False
    for g in ids:
        await agg.flush_final(g, 1)
    await agg.close()
    # the oldest attempt's report was dropped: billed at its older (zero) watermark
    assert [billable(store, g) for g in ids] == [UsageCounts(0, 0), UsageCounts(5, 5), UsageCounts(5, 5)]
