"""Ending a generation ends its attempt (control) and seals its bill and releases its reservation
(billing) in one transaction; a fenced-off end changes neither side."""

from __future__ import annotations

from datetime import timedelta

import pytest

from billing.ledger import RateUsage, TenantLoad, rate_usage, tenant_load
from billing.usage import UsageCounts, UsageReport, WatermarkView, read_watermark, record_usage
from control.errors import IllegalTransition, LeaseExpired, StaleEpoch
from control.models import Attempt, Generation
from control.states import GenerationState
from control.termination import WORKER_LOST
from datastore.store import Store
from lifecycle.attempts import start_attempt
from lifecycle.termination import (
    QUEUE_ABANDONED,
    Ended,
    finish,
    finish_queued,
    interrupt,
    sweep_abandoned_queued,
    withdraw_queued,
    withdraw_unadmitted,
)
from tests.builders import T0, TENANT, admitted, at, on, running, seed

S = GenerationState


def billed(store: Store, generation_id: str, epoch: int = 1) -> WatermarkView | None:
    with store.transaction() as session:
        return read_watermark(session, generation_id, epoch)


def ledger(store: Store, seconds: float = 0) -> tuple[TenantLoad, RateUsage]:
    with store.transaction() as session:
        return tenant_load(session, TENANT), rate_usage(session, TENANT, now=at(seconds))


def test_finish_ends_the_attempt_and_returns_its_sealed_bill(store: Store) -> None:
    seed(store)
    lease = running(store, input_tokens=50, output_tokens=200)
    g = lease.generation_id
    ended = finish(store, lease, state=S.CANCELED, reason="SLOW_CONSUMER", now=at(3))
    nothing = WatermarkView(g, 1, UsageCounts(), UsageCounts(), sealed=True)
    assert ended == Ended(g, S.CANCELED, "SLOW_CONSUMER", at(3), nothing)
    with store.transaction() as session:
        attempt = session.get(Attempt, (g, 1))
    assert attempt is not None
    assert (attempt.ended_at, attempt.outcome, attempt.terminal_reason) == (
        at(3),
        S.CANCELED,
        "SLOW_CONSUMER",
    )
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))


def test_interrupt_keeps_the_last_watermark_as_the_bill(store: Store) -> None:
    seed(store)
    lease = running(store)
    g = lease.generation_id
    with store.transaction() as session:
        record_usage(session, [UsageReport(g, 1, 1, 50, 12)], now=at(2))
    ended = interrupt(store, g, 1, reason=WORKER_LOST, now=at(4))
    assert (ended.state, ended.terminal_reason, ended.finished_at) == (S.INTERRUPTED, WORKER_LOST, at(4))
    assert ended.bill is not None and (ended.bill.billable, ended.bill.sealed) == (UsageCounts(50, 12), True)
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 50, 12))
    with pytest.raises(StaleEpoch):
        interrupt(store, g, 2, reason=WORKER_LOST, now=at(5))


def test_a_fenced_off_finish_changes_neither_side(store: Store) -> None:
    seed(store)
    lease = running(store)
    with pytest.raises(LeaseExpired):
        finish(store, lease, state=S.COMPLETED, reason="COMPLETED", now=at(30))
    with pytest.raises(IllegalTransition):
        finish(store, lease, state=S.RUNNING, reason="COMPLETED", now=at(1))
    view = billed(store, lease.generation_id)
    assert view is not None and not view.sealed
    assert ledger(store)[0] == TenantLoad(1, 250)


def test_a_queued_generation_that_never_ran_refunds_everything(store: Store) -> None:
    seed(store)
    generation_id = admitted(store, input_tokens=50, output_tokens=200)
    ended = finish_queued(store, generation_id, state=S.FAILED, reason="NO_CAPACITY", now=at(1))
    assert ended == Ended(generation_id, S.FAILED, "NO_CAPACITY", at(1), None)
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))
    with pytest.raises(IllegalTransition):
        finish_queued(store, generation_id, state=S.CANCELED, reason="CANCELED", now=at(2))


def test_queued_generations_whose_frontend_went_away_are_failed_and_billed_nothing(store: Store) -> None:
    seed(store)
    stale = admitted(store, "stale", now=T0)
    fresh = admitted(store, "fresh", now=at(50))
    started = running(store, "started", now=T0).generation_id
    swept = sweep_abandoned_queued(store, now=at(70), older_than=timedelta(seconds=60))
    assert swept == [stale]
    with store.transaction() as session:
        states = {g: session.get(Generation, g) for g in (stale, fresh, started)}
    assert {g: (r.state, r.terminal_reason) for g, r in states.items() if r is not None} == {
        stale: (S.FAILED, QUEUE_ABANDONED),
        fresh: (S.QUEUED, None),
        started: (S.RUNNING, None),
    }
    with store.transaction() as session:
        assert tenant_load(session, TENANT) == TenantLoad(2, 500)  # only fresh and started hold theirs
    assert sweep_abandoned_queued(store, now=at(70), older_than=timedelta(seconds=60)) == []


def test_a_generation_refused_before_it_ran_is_withdrawn_and_its_request_id_is_free(store: Store) -> None:
    seed(store)
    refused = admitted(store, "retry-me", now=T0)
    withdraw_queued(store, refused, now=at(1))
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))  # nothing held, nothing charged
    with store.transaction() as session:
        assert session.get(Generation, refused) is None
    again = admitted(store, "retry-me", now=at(2))  # the same request id is a new request
    with store.transaction() as session:
        row = session.get(Generation, again)
        assert row is not None and row.state is S.QUEUED
    assert ledger(store, 2)[0] == TenantLoad(1, 250)
    started = running(store, "started", now=T0).generation_id
    with pytest.raises(IllegalTransition):
        withdraw_queued(store, started, now=at(3))


def test_a_first_attempt_no_worker_admitted_is_withdrawn_and_its_request_id_is_free(store: Store) -> None:
    """Every worker refused it or was down (its stub had died): nothing ran, so like a refusal
    before it ran it leaves no record, no reservation and no bill, and its request id is reusable."""
    seed(store)
    lease = running(store, "retry-me", now=T0)
    withdraw_unadmitted(store, lease, now=at(1))
    assert ledger(store) == (TenantLoad(0, 0), RateUsage(T0, 0, 0))  # nothing held, nothing charged
    with store.transaction() as session:
        assert session.get(Generation, lease.generation_id) is None
        assert session.get(Attempt, (lease.generation_id, 1)) is None
    assert billed(store, lease.generation_id) is None  # its opened watermark went with it
    again = running(store, "retry-me", now=at(2))  # the same request id runs afresh
    assert (again.generation_id, again.epoch) == (lease.generation_id, 1)
    assert ledger(store, 2)[0] == TenantLoad(1, 250)


def test_only_a_live_first_attempt_is_withdrawn(store: Store) -> None:
    seed(store)
    lease = running(store, "expired", now=T0)
    with pytest.raises(LeaseExpired):  # the sweeper's to interrupt now
        withdraw_unadmitted(store, lease, now=at(30))
    second = start_attempt(store, lease.generation_id, on("w2"), now=at(30))
    with pytest.raises(IllegalTransition):  # it ran before: its first attempt's bill stays
        withdraw_unadmitted(store, second, now=at(31))
    with pytest.raises(StaleEpoch):
        withdraw_unadmitted(store, lease, now=at(31))
    with store.transaction() as session:
        row = session.get(Generation, lease.generation_id)
        assert row is not None and row.state is S.RUNNING and row.current_epoch == 2
