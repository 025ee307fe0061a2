from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from billing.errors import InvalidUsageReport
from billing.models import UsageEvent
from billing.seal import seal_watermark
from billing.totals import generation_usage
from billing.usage import RecordOutcome, UsageCounts, UsageReport, read_watermark, record_usage
from datastore.store import Store
from tests.builders import at, running, seed, tenant_spec


def record(store: Store, *reports: UsageReport, seconds: float = 1) -> RecordOutcome:
    with store.transaction() as session:
        return record_usage(session, list(reports), now=at(seconds))


def billable(store: Store, generation_id: str, epoch: int = 1) -> UsageCounts:
    with store.transaction() as session:
        view = read_watermark(session, generation_id, epoch)
    assert view is not None
    return view.billable


def test_watermarks_advance_monotonically(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    assert record(store, UsageReport(g, 1, 1, 50, 10, 20)) == RecordOutcome(1, 0, 0, 0)
    assert billable(store, g) == UsageCounts(50, 10, 20)
    record(store, UsageReport(g, 1, 3, 50, 30, 20))
    assert billable(store, g) == UsageCounts(50, 30, 20)
    assert record(store, UsageReport(g, 1, 2, 50, 20, 20)) == RecordOutcome(1, 0, 0, 0)
    assert billable(store, g) == UsageCounts(50, 30, 20)


def test_a_duplicate_identity_is_ignored_even_with_other_counts(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    record(store, UsageReport(g, 1, 1, 50, 10))
    outcome = record(
        store, UsageReport(g, 1, 1, 50, 10), UsageReport(g, 1, 1, 50, 99), UsageReport(g, 1, 2, 50, 12)
    )
    assert outcome == RecordOutcome(recorded=1, duplicates=2, unknown=0, after_seal=0)
    assert billable(store, g) == UsageCounts(50, 12)
    with store.transaction() as session:
        assert session.scalar(select(func.count()).select_from(UsageEvent)) == 2


def test_reports_for_unknown_attempts_are_dropped(store: Store) -> None:
    seed(store)
    g = running(store).generation_id
    outcome = record(
        store, UsageReport(g, 2, 1, 5, 5), UsageReport("nope", 1, 1, 5, 5), UsageReport(g, 1, 1, 5, 1)
    )
    assert outcome == RecordOutcome(recorded=1, duplicates=0, unknown=2, after_seal=0)
    assert record(store) == RecordOutcome(0, 0, 0, 0)


def test_after_the_seal_reports_raise_only_the_observed_counts(store: Store) -> None:
    seed(store)
    lease = running(store)
    g = lease.generation_id
    record(store, UsageReport(g, 1, 1, 50, 10))
    with store.transaction() as session:
        seal_watermark(session, g, 1, now=at(2))
    assert record(store, UsageReport(g, 1, 2, 50, 15), seconds=3) == RecordOutcome(1, 0, 0, 1)
    with store.transaction() as session:
        view = read_watermark(session, g, 1)
    assert view is not None
    assert (view.billable, view.observed, view.unbilled, view.sealed) == (
        UsageCounts(50, 10),
        UsageCounts(50, 15),
        UsageCounts(0, 5),
        True,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 1, 1, 1), "start at 1"),
        ((1, 0, 1, 1), "start at 1"),
        ((1, 1, -1, 1), "non-negative"),
        ((1, 1, 1, -1), "non-negative"),
    ],
)
def test_impossible_reports_are_refused(args: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(InvalidUsageReport, match=message):
        UsageReport("g", *args)
    with pytest.raises(InvalidUsageReport, match="cached input exceeds input"):
        UsageReport("g", 1, 1, 5, 0, 6)


_requests = itertools.count()


def cumulative(increments: list[tuple[int, int, int]], generation_id: str) -> list[UsageReport]:
    reports, i, o, c = [], 0, 0, 0
    for seq, (di, do, dc) in enumerate(increments, start=1):
        i, o, c = i + di, o + do, min(c + dc, i + di)
        reports.append(UsageReport(generation_id, 1, seq, i, o, c))
    return reports


def peak(reports: list[UsageReport]) -> UsageCounts:
    if not reports:
        return UsageCounts()
    return UsageCounts(
        max(r.input_tokens for r in reports),
        max(r.output_tokens for r in reports),
        max(r.cached_input_tokens for r in reports),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_reports_out_of_order_and_duplicated_bill_the_max_once(store: Store, data: st.DataObject) -> None:
    seed(store, tenant_spec(max_concurrent_generations=1000))  # one generation per example
    lease = running(store, f"r{next(_requests)}")
    g = lease.generation_id
    increments = data.draw(st.lists(st.tuples(*[st.integers(0, 40)] * 3), min_size=1, max_size=10))
    reports = cumulative(increments, g)
    delivered = data.draw(st.lists(st.sampled_from(reports), min_size=1, max_size=3 * len(reports)))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(delivered)), max_size=4)))
    batches = [delivered[a:b] for a, b in itertools.pairwise([0, *cuts, len(delivered)]) if a < b]
    seal_after = data.draw(st.integers(0, len(batches)))

    for i, batch in enumerate(batches):
        if i == seal_after:
            with store.transaction() as session:
                seal_watermark(session, g, 1, now=at(i))
        record(store, *batch, seconds=i)
    before_seal = [r for batch in batches[:seal_after] for r in batch]

    with store.transaction() as session:
        view = read_watermark(session, g, 1)
        usage = generation_usage(session, g)
        events = session.scalar(
            select(func.count()).select_from(UsageEvent).where(UsageEvent.generation_id == g)
        )
    assert view is not None
    assert view.billable == peak(before_seal if seal_after < len(batches) else delivered)
    assert view.observed == peak(delivered)
    assert usage.billed == view.billable
    assert usage.final is (seal_after < len(batches))
    assert events == len({r.identity for r in delivered})
