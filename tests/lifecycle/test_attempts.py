from __future__ import annotations

import pytest
from sqlalchemy import select

from billing.ledger import TenantLoad, tenant_load
from billing.models import Watermark
from billing.totals import generation_usage
from billing.usage import UsageCounts, UsageReport, read_watermark, record_usage
from control.attempts import SUPERSEDED, Lease
from control.cancel import request_cancel
from control.errors import LeaseExpired, LeaseHeld
from control.generations import get_generation
from control.models import Attempt
from control.states import GenerationState
from control.termination import interrupt_attempt
from datastore.store import Store
from lifecycle.attempts import Renewal, renew_lease, renew_leases, start_attempt
from tests.builders import LEASE, TENANT, admitted, at, on, running, seed

S = GenerationState


def watermark_keys(store: Store) -> list[tuple[str, int]]:
    with store.transaction() as session:
        return [
            (w.generation_id, w.epoch) for w in session.scalars(select(Watermark).order_by(Watermark.epoch))
        ]


def test_the_first_attempt_opens_a_zero_watermark(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    lease = start_attempt(store, generation_id, on("w1"), now=at(1))
    assert lease == Lease(generation_id, 1, "w1", at(31))
    with store.transaction() as session:
        g = get_generation(session, TENANT, generation_id)
        watermark = read_watermark(session, generation_id, 1)
    assert (g.state, g.current_epoch, g.updated_at) == (S.RUNNING, 1, at(1))
    assert watermark is not None and (watermark.billable, watermark.sealed) == (UsageCounts(), False)


def test_a_superseded_attempt_is_sealed_and_the_reservation_stays(store: Store) -> None:
    seed(store)
    old = running(store)
    new = start_attempt(store, old.generation_id, on("w2"), now=at(40))
    assert new == Lease(old.generation_id, 2, "w2", at(70))
    with store.transaction() as session:
        g = get_generation(session, TENANT, old.generation_id)
        first = session.get(Attempt, (old.generation_id, 1))
        sealed = read_watermark(session, old.generation_id, 1)
        current = read_watermark(session, old.generation_id, 2)
        load = tenant_load(session, TENANT)
    assert (g.state, g.current_epoch) == (S.RUNNING, 2)
    assert first is not None and (first.ended_at, first.outcome, first.terminal_reason) == (
        at(40),
        S.INTERRUPTED,
        SUPERSEDED,
    )
    assert sealed is not None and sealed.sealed
    assert current is not None and not current.sealed
    assert load == TenantLoad(1, 250)


def test_a_stale_epochs_usage_report_is_not_billed(store: Store) -> None:
    seed(store)
    old = running(store)
    with store.transaction() as session:
        record_usage(session, [UsageReport(old.generation_id, 1, 1, 50, 10)], now=at(5))
    new = start_attempt(store, old.generation_id, on("w2"), now=at(40))
    with store.transaction() as session:
        record_usage(session, [UsageReport(new.generation_id, 2, 1, 50, 3)], now=at(41))
    with store.transaction() as session:
        outcome = record_usage(session, [UsageReport(old.generation_id, 1, 2, 50, 25)], now=at(42))
    assert (outcome.recorded, outcome.after_seal) == (1, 1)
    with store.transaction() as session:
        stale = read_watermark(session, old.generation_id, 1)
        current = read_watermark(session, old.generation_id, 2)
        usage = generation_usage(session, old.generation_id)
    assert stale is not None and (stale.billable, stale.observed) == (
        UsageCounts(50, 10),
        UsageCounts(50, 25),
    )
    assert current is not None and current.billable == UsageCounts(50, 3)
    assert (usage.billed, usage.final) == (UsageCounts(100, 13), False)


def test_a_refused_start_opens_and_seals_nothing(store: Store) -> None:
    seed(store)
    lease = running(store)
    with pytest.raises(LeaseHeld):
        start_attempt(store, lease.generation_id, on("w2"), now=at(29))
    assert watermark_keys(store) == [(lease.generation_id, 1)]
    with store.transaction() as session:
        view = read_watermark(session, lease.generation_id, 1)
    assert view is not None and not view.sealed


def test_a_live_lease_is_renewed_and_an_expired_one_is_not(store: Store) -> None:
    seed(store)
    lease = running(store)
    renewed = renew_lease(store, lease, now=at(20), lease_for=LEASE)
    assert renewed == Lease(lease.generation_id, 1, "w1", at(50))
    with pytest.raises(LeaseExpired):
        renew_lease(store, renewed, now=at(50), lease_for=LEASE)


def test_one_round_renews_every_lease_and_tells_the_lost_and_the_cancelled(store: Store) -> None:
    """A frontend's renewals in one transaction: a lease fenced off (swept) is lost, and a cancel
    intent recorded by another frontend is reported, its lease renewed all the same."""
    seed(store)
    kept, swept, cancelled = (running(store, r) for r in ("kept", "swept", "cancelled"))
    with store.transaction() as session:
        interrupt_attempt(session, swept.generation_id, swept.epoch, reason="LEASE_EXPIRED", now=at(1))
        request_cancel(session, TENANT, cancelled.generation_id, now=at(1))
    renewal = renew_leases(store, [kept, swept, cancelled], now=at(10), lease_for=LEASE)
    assert renewal == Renewal(frozenset({swept.generation_id}), frozenset({cancelled.generation_id}))
    with store.transaction() as session:
        expiry = {a.generation_id: a.lease_expires_at for a in session.scalars(select(Attempt))}
    assert expiry[kept.generation_id] == expiry[cancelled.generation_id] == at(10) + LEASE
    assert renew_leases(store, [], now=at(11), lease_for=LEASE) == Renewal(frozenset(), frozenset())


def test_a_start_retried_after_its_commit_returns_the_same_attempt(store: Store) -> None:
    """A failover can break the connection after the start committed: the retry (same worker, same
    start time) finds that attempt instead of refusing LEASE_HELD or opening a second epoch."""
    seed(store)
    generation_id = admitted(store)
    first = start_attempt(store, generation_id, on("w1"), now=at(1))
    again = start_attempt(store, generation_id, on("w1"), now=at(1))
    assert again == first and first.epoch == 1
    with pytest.raises(LeaseHeld):  # a different caller still meets the live lease
        start_attempt(store, generation_id, on("w2"), now=at(1))
