from __future__ import annotations

from datetime import timedelta

from control.attempts import renew_lease
from control.generations import get_generation
from control.models import Attempt
from control.states import GenerationState
from control.sweeper import SweptAttempt, expired_attempts, interrupt_expired
from control.termination import LEASE_EXPIRED, finish_attempt
from datastore.store import Store
from tests.builders import LEASE, T0, TENANT, at, running, seed

S = GenerationState


def expired(store: Store, seconds: float, limit: int = 100) -> list[SweptAttempt]:
    with store.transaction() as session:
        return expired_attempts(session, now=at(seconds), limit=limit)


def test_renewed_and_ended_attempts_are_not_found(store: Store) -> None:
    seed(store)
    lease = running(store)
    with store.transaction() as session:
        renew_lease(session, lease, now=at(20), lease_for=LEASE)
    assert expired(store, 30) == []
    assert expired(store, 50) == [SweptAttempt(lease.generation_id, 1, "w1")]
    with store.transaction() as session:
        finish_attempt(session, lease, state=S.COMPLETED, reason="COMPLETED", now=at(49))
    assert expired(store, 50) == []


def test_the_lease_boundary(store: Store) -> None:
    seed(store)
    running(store)
    with store.transaction() as session:
        assert expired_attempts(session, now=T0 + LEASE - timedelta(microseconds=1)) == []
        assert [s.epoch for s in expired_attempts(session, now=T0 + LEASE)] == [1]


def test_at_most_the_limit_oldest_lease_first(store: Store) -> None:
    seed(store)
    leases = [running(store, f"r{i}", now=at(i)) for i in range(3)]
    assert [s.generation_id for s in expired(store, 100, limit=2)] == [
        leases[0].generation_id,
        leases[1].generation_id,
    ]


def test_a_candidate_is_interrupted_only_if_still_expired_under_the_lock(store: Store) -> None:
    seed(store)
    renewed = running(store, "r1")
    finished = running(store, "r2")
    crashed = running(store, "r3")
    candidates = expired(store, 30)
    assert [c.generation_id for c in candidates] == sorted(
        [renewed.generation_id, finished.generation_id, crashed.generation_id]
    )
    with store.transaction() as session:  # after the scan: one renewed, one finished
        renew_lease(session, renewed, now=at(29), lease_for=LEASE)
        finish_attempt(session, finished, state=S.COMPLETED, reason="COMPLETED", now=at(29))
    with store.transaction() as session:
        outcomes = {c.generation_id: interrupt_expired(session, c, now=at(30)) for c in candidates}
        attempt = session.get(Attempt, (crashed.generation_id, 1))
        assert get_generation(session, TENANT, renewed.generation_id).state is S.RUNNING
    assert outcomes[renewed.generation_id] is None
    assert outcomes[finished.generation_id] is None
    interrupted = outcomes[crashed.generation_id]
    assert interrupted is not None
    assert (interrupted.state, interrupted.terminal_reason, interrupted.finished_at) == (
        S.INTERRUPTED,
        LEASE_EXPIRED,
        at(30),
    )
    assert attempt is not None
    assert (attempt.ended_at, attempt.outcome, attempt.terminal_reason) == (
        at(30),
        S.INTERRUPTED,
        LEASE_EXPIRED,
    )
