"""The worked example (docs/design.md §4): a 100-token watermark, a crash at token 120.

t=0   admitted (prompt 50, max output 200) and started on w1, lease 30 s
t=5   report #1: 100 output tokens, flushed: the durable watermark
t=8   the worker generates up to token 120, reports #2 (120), then crashes; #2 is still in flight
t=30  the lease expires; the sweeper interrupts and seals the attempt: bill 100
t=31  the delayed duplicate of #1 and the late #2 (120) arrive: the bill stays 100; 20 tokens are
      an unbilled estimate
"""

from __future__ import annotations

from datetime import datetime, timedelta

from billing.aggregator import UsageAggregator
from billing.ledger import RateUsage, TenantLoad, rate_usage, tenant_load
from billing.totals import generation_usage
from billing.usage import UsageCounts, UsageReport, read_watermark, record_usage
from control.generations import get_generation
from control.models import Attempt
from control.states import GenerationState
from control.termination import LEASE_EXPIRED
from datastore.store import Store
from lifecycle.reads import usage_by_tenant
from lifecycle.termination import finish, sweep_expired_leases
from tests.builders import T0, TENANT, at, running, seed


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def test_the_worked_example(store: Store) -> None:
    seed(store)
    lease = running(store, input_tokens=50, output_tokens=200)
    g = lease.generation_id
    clock = Clock(at(5))
    async with UsageAggregator(store.sessions, clock=clock) as aggregator:
        aggregator.report(UsageReport(g, 1, 1, 50, 100))
        durable = await aggregator.flush_final(g, 1)
        assert durable is not None and (durable.billable, durable.sealed) == (UsageCounts(50, 100), False)

        swept = sweep_expired_leases(store, now=at(30))  # the crash: nobody renews
        assert [(s.generation_id, s.epoch) for s in swept] == [(g, 1)]

        clock.now = at(31)
        aggregator.report(UsageReport(g, 1, 1, 50, 100))  # the delayed duplicate
        aggregator.report(UsageReport(g, 1, 2, 50, 120))  # the late report of the crash tail
        final = await aggregator.flush_final(g, 1)
    assert final is not None
    assert (final.billable, final.observed, final.unbilled, final.sealed) == (
        UsageCounts(50, 100),
        UsageCounts(50, 120),
        UsageCounts(0, 20),
        True,
    )
    assert (aggregator.stats.recorded, aggregator.stats.duplicates, aggregator.stats.after_seal) == (2, 1, 1)

    tenant = usage_by_tenant(store, TENANT, start=T0, end=T0 + timedelta(hours=1))
    with store.transaction() as session:
        generation = get_generation(session, TENANT, g)
        attempt = session.get(Attempt, (g, 1))
        usage = generation_usage(session, g)
        load = tenant_load(session, TENANT)
        window = rate_usage(session, TENANT, now=at(31))
    assert (generation.state, generation.terminal_reason) == (GenerationState.INTERRUPTED, LEASE_EXPIRED)
    assert attempt is not None and (attempt.outcome, attempt.terminal_reason) == (
        GenerationState.INTERRUPTED,
        LEASE_EXPIRED,
    )
    assert (usage.billed, usage.final) == (UsageCounts(50, 100), True)
    assert tenant.recorded == UsageCounts(50, 100)
    assert tenant.interrupted == UsageCounts(50, 100)
    assert tenant.unbilled == UsageCounts(0, 20)
    assert load == TenantLoad(0, 0)
    assert window == RateUsage(T0, 50, 100)  # 100 unused output tokens refunded


def test_a_normal_completion_seals_the_flushed_total_and_refunds_the_rest(store: Store) -> None:
    seed(store)
    lease = running(store, input_tokens=50, output_tokens=200)
    g = lease.generation_id
    with store.transaction() as session:
        record_usage(session, [UsageReport(g, 1, 1, 50, 30, 16)], now=at(2))
    ended = finish(store, lease, state=GenerationState.COMPLETED, reason="STOP_SEQUENCE", now=at(3))
    assert ended.bill is not None and (ended.bill.billable, ended.bill.sealed) == (
        UsageCounts(50, 30, 16),
        True,
    )
    with store.transaction() as session:
        view = read_watermark(session, g, 1)
        assert view is not None and (view.billable, view.sealed) == (UsageCounts(50, 30, 16), True)
        assert tenant_load(session, TENANT) == TenantLoad(0, 0)
        assert rate_usage(session, TENANT, now=at(3)) == RateUsage(T0, 50, 30)
    tenant = usage_by_tenant(store, TENANT, start=T0, end=at(60))
    assert (tenant.recorded, tenant.interrupted, tenant.unbilled) == (
        UsageCounts(50, 30, 16),
        UsageCounts(),
        UsageCounts(),
    )
