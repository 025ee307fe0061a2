from __future__ import annotations

from datetime import timedelta

import pytest

from billing.ledger import TenantLoad, tenant_load
from billing.usage import UsageCounts, UsageReport, read_watermark, record_usage
from control.errors import AttemptEnded
from control.generations import get_generation
from control.models import Attempt
from control.states import GenerationState
from control.sweeper import SweptAttempt
from control.termination import LEASE_EXPIRED
from datastore.store import Store
from lifecycle.attempts import renew_lease
from lifecycle.termination import finish, sweep_expired_leases
from tests.builders import LEASE, T0, TENANT, at, running, seed

S = GenerationState


def test_expired_leases_are_interrupted_and_sealed(store: Store) -> None:
    seed(store)
    crashed = running(store, "r1", worker_id="w1")
    alive = running(store, "r2", worker_id="w2")
    done = running(store, "r3", worker_id="w3")
    with store.transaction() as session:
        record_usage(session, [UsageReport(crashed.generation_id, 1, 1, 50, 40)], now=at(5))
    renew_lease(store, alive, now=at(20), lease_for=LEASE)
    finish(store, done, state=S.COMPLETED, reason="COMPLETED", now=at(20))
    swept = sweep_expired_leases(store, now=at(30))
    assert swept == [SweptAttempt(crashed.generation_id, 1, "w1")]
    with store.transaction() as session:
        g = get_generation(session, TENANT, crashed.generation_id)
        attempt = session.get(Attempt, (crashed.generation_id, 1))
        watermark = read_watermark(session, crashed.generation_id, 1)
        assert get_generation(session, TENANT, alive.generation_id).state is S.RUNNING
        assert tenant_load(session, TENANT) == TenantLoad(1, 250)
    assert (g.state, g.terminal_reason, g.finished_at) == (S.INTERRUPTED, LEASE_EXPIRED, at(30))
    assert attempt is not None
    assert (attempt.ended_at, attempt.outcome, attempt.terminal_reason) == (
        at(30),
        S.INTERRUPTED,
        LEASE_EXPIRED,
    )
    assert watermark is not None and (watermark.billable, watermark.sealed) == (UsageCounts(50, 40), True)
    assert sweep_expired_leases(store, now=at(31)) == []


def test_the_lease_boundary(store: Store) -> None:
    seed(store)
    lease = running(store)
    assert sweep_expired_leases(store, now=T0 + LEASE - timedelta(microseconds=1)) == []
    assert [s.epoch for s in sweep_expired_leases(store, now=T0 + LEASE)] == [1]
    with pytest.raises(AttemptEnded):
        finish(store, lease, state=S.COMPLETED, reason="COMPLETED", now=at(29))


def test_the_sweeper_takes_at_most_its_limit_oldest_first(store: Store) -> None:
    seed(store)
    leases = [running(store, f"r{i}", now=at(i)) for i in range(3)]
    first = sweep_expired_leases(store, now=at(100), limit=2)
    rest = sweep_expired_leases(store, now=at(100), limit=2)
    assert [s.generation_id for s in first] == [leases[0].generation_id, leases[1].generation_id]
    assert [s.generation_id for s in rest] == [leases[2].generation_id]
