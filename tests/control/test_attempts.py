from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from control.attempts import SUPERSEDED, Lease, StartedAttempt, fence, renew_lease, start_attempt
from control.cancel import request_cancel
from control.errors import AttemptEnded, CancelRequested, LeaseExpired, LeaseHeld, StaleEpoch
from control.generations import get_generation
from control.models import Attempt
from control.states import GenerationState
from control.termination import finish_attempt
from datastore.store import Store
from tests.builders import LEASE, T0, TENANT, admitted, at, running, seed

S = GenerationState


def attempts(store: Store, generation_id: str) -> list[tuple[int, str, object, object, object]]:
    with store.transaction() as session:
        rows = session.scalars(
            select(Attempt).where(Attempt.generation_id == generation_id).order_by(Attempt.epoch)
        )
        return [(a.epoch, a.worker_id, a.ended_at, a.outcome, a.terminal_reason) for a in rows]


def test_the_first_attempt_is_epoch_1_with_a_lease(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    with store.transaction() as session:
        started = start_attempt(session, generation_id, worker_id="w1", now=at(1), lease_for=LEASE)
    assert started == StartedAttempt(Lease(generation_id, 1, "w1", at(31)), superseded=None)
    with store.transaction() as session:
        g = get_generation(session, TENANT, generation_id)
    assert (g.state, g.current_epoch, g.updated_at) == (S.RUNNING, 1, at(1))
    assert attempts(store, generation_id) == [(1, "w1", None, None, None)]


def test_a_live_lease_is_renewed_and_an_expired_one_is_not(store: Store) -> None:
    seed(store)
    lease = running(store)
    with store.transaction() as session:
        renewed = renew_lease(session, lease, now=at(20), lease_for=LEASE)
    assert renewed.expires_at == at(50)
    with pytest.raises(LeaseExpired), store.transaction() as session:
        renew_lease(session, renewed, now=at(50), lease_for=LEASE)
    with store.transaction() as session:
        assert session.get(Attempt, (lease.generation_id, 1)) is not None
        expiry = session.scalars(select(Attempt.lease_expires_at)).one()
    assert expiry == at(50)


def test_a_lease_still_held_cannot_be_replaced(store: Store) -> None:
    seed(store)
    lease = running(store)
    with pytest.raises(LeaseHeld) as e, store.transaction() as session:
        start_attempt(session, lease.generation_id, worker_id="w2", now=at(29), lease_for=LEASE)
    assert e.value.epoch == 1
    assert attempts(store, lease.generation_id) == [(1, "w1", None, None, None)]


def test_an_expired_attempt_is_ended_and_superseded_by_a_new_epoch(store: Store) -> None:
    seed(store)
    old = running(store)
    with store.transaction() as session:
        new = start_attempt(session, old.generation_id, worker_id="w2", now=at(40), lease_for=LEASE)
    assert new == StartedAttempt(Lease(old.generation_id, 2, "w2", at(70)), superseded=1)
    assert attempts(store, old.generation_id) == [
        (1, "w1", at(40), S.INTERRUPTED, SUPERSEDED),
        (2, "w2", None, None, None),
    ]
    with store.transaction() as session:
        g = get_generation(session, TENANT, old.generation_id)
    assert (g.state, g.current_epoch) == (S.RUNNING, 2)


def test_a_stale_epochs_terminal_update_is_rejected(store: Store) -> None:
    seed(store)
    old = running(store)
    with store.transaction() as session:
        new = start_attempt(session, old.generation_id, worker_id="w2", now=at(40), lease_for=LEASE).lease
    for late in (old, Lease(old.generation_id, 1, "w1", at(1000))):
        with pytest.raises(StaleEpoch) as e, store.transaction() as session:
            finish_attempt(session, late, state=S.COMPLETED, reason="COMPLETED", now=at(41))
        assert (e.value.epoch, e.value.current_epoch) == (1, 2)
    with pytest.raises(StaleEpoch), store.transaction() as session:
        renew_lease(session, old, now=at(41), lease_for=LEASE)
    with store.transaction() as session:
        assert get_generation(session, TENANT, old.generation_id).state is S.RUNNING
        finish_attempt(session, new, state=S.COMPLETED, reason="COMPLETED", now=at(42))
    with store.transaction() as session:
        g = get_generation(session, TENANT, old.generation_id)
    assert (g.state, g.terminal_reason, g.current_epoch) == (S.COMPLETED, "COMPLETED", 2)


def test_a_worker_other_than_the_lease_holder_is_fenced_off(store: Store) -> None:
    seed(store)
    lease = running(store)
    impostor = Lease(lease.generation_id, 1, "w9", lease.expires_at)
    with pytest.raises(StaleEpoch), store.transaction() as session:
        finish_attempt(session, impostor, state=S.COMPLETED, reason="COMPLETED", now=at(1))
    with pytest.raises(StaleEpoch), store.transaction() as session:
        fence(session, Lease(lease.generation_id, 2, "w1", lease.expires_at), now=at(1))


def test_an_expired_lease_cannot_finish(store: Store) -> None:
    seed(store)
    lease = running(store)
    with pytest.raises(LeaseExpired), store.transaction() as session:
        finish_attempt(session, lease, state=S.COMPLETED, reason="COMPLETED", now=at(30))
    with store.transaction() as session:
        finish_attempt(
            session, lease, state=S.COMPLETED, reason="COMPLETED", now=T0 + LEASE - timedelta(microseconds=1)
        )
    with pytest.raises(AttemptEnded), store.transaction() as session:
        finish_attempt(session, lease, state=S.COMPLETED, reason="COMPLETED", now=at(2))


def test_no_new_attempt_after_a_cancel_request(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    with store.transaction() as session:
        request_cancel(session, TENANT, generation_id, now=at(1))
    with pytest.raises(CancelRequested), store.transaction() as session:
        start_attempt(session, generation_id, worker_id="w1", now=at(2), lease_for=LEASE)
    assert attempts(store, generation_id) == []


def test_a_lease_must_have_a_positive_length(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    with pytest.raises(ValueError, match="positive"), store.transaction() as session:
        start_attempt(session, generation_id, worker_id="w1", now=at(1), lease_for=timedelta(0))
