from __future__ import annotations

import itertools

import pytest
from sqlalchemy import select

from control.attempts import start_attempt
from control.errors import AttemptEnded, IllegalTransition
from control.generations import get_generation, lock_generation
from control.models import Generation
from control.states import ALLOWED_TRANSITIONS, TERMINAL_STATES, GenerationState, transition
from control.termination import finish_attempt, finish_queued
from datastore.store import Store
from tests.builders import LEASE, T0, TENANT, admitted, at, running, seed

S = GenerationState
EXPECTED_EDGES = {
    (S.QUEUED, S.RUNNING),
    (S.QUEUED, S.CANCELED),
    (S.QUEUED, S.FAILED),
    (S.RUNNING, S.COMPLETED),
    (S.RUNNING, S.CANCELED),
    (S.RUNNING, S.INTERRUPTED),
    (S.RUNNING, S.FAILED),
}


def test_the_transition_table() -> None:
    edges = {(a, b) for a, targets in ALLOWED_TRANSITIONS.items() for b in targets}
    assert edges == EXPECTED_EDGES
    assert {S.COMPLETED, S.CANCELED, S.INTERRUPTED, S.FAILED} == TERMINAL_STATES


@pytest.mark.parametrize(("start", "to"), list(itertools.product(S, S)))
def test_every_transition_is_checked_against_the_table(store: Store, start: S, to: S) -> None:
    seed(store)
    generation_id = admitted(store)
    with store.transaction() as session:
        generation = lock_generation(session, generation_id)
        generation.state = start  # set up the starting state directly
    with store.transaction() as session:
        generation = lock_generation(session, generation_id)
        if (start, to) in EXPECTED_EDGES:
            transition(generation, to, now=at(1), reason="WHY")
        else:
            with pytest.raises(IllegalTransition) as e:
                transition(generation, to, now=at(1), reason="WHY")
            assert (e.value.current, e.value.requested) == (str(start), str(to))
    with store.transaction() as session:
        stored = session.scalars(select(Generation).where(Generation.id == generation_id)).one()
    if (start, to) in EXPECTED_EDGES:
        assert (stored.state, stored.updated_at) == (to, at(1))
        assert (stored.finished_at, stored.terminal_reason) == (
            (at(1), "WHY") if to.terminal else (None, None)
        )
    else:
        assert (stored.state, stored.updated_at, stored.finished_at) == (start, T0, None)


def test_a_terminal_generation_is_final(store: Store) -> None:
    seed(store)
    lease = running(store)
    with store.transaction() as session:
        finish_attempt(session, lease, state=S.COMPLETED, reason="OUTPUT_LIMIT", now=at(5))
    with pytest.raises(AttemptEnded), store.transaction() as session:
        finish_attempt(session, lease, state=S.FAILED, reason="LATE", now=at(6))
    with pytest.raises(IllegalTransition), store.transaction() as session:
        start_attempt(session, lease.generation_id, worker_id="w2", now=at(7), lease_for=LEASE)
    with pytest.raises(IllegalTransition), store.transaction() as session:
        finish_queued(session, lease.generation_id, state=S.CANCELED, reason="CANCELED", now=at(8))
    with store.transaction() as session:
        g = get_generation(session, TENANT, lease.generation_id)
    assert (g.state, g.terminal_reason, g.finished_at, g.current_epoch) == (
        S.COMPLETED,
        "OUTPUT_LIMIT",
        at(5),
        1,
    )


def test_finishing_in_a_non_terminal_state_is_refused(store: Store) -> None:
    seed(store)
    lease = running(store)
    for state in (S.QUEUED, S.RUNNING):
        with pytest.raises(IllegalTransition), store.transaction() as session:
            finish_attempt(session, lease, state=state, reason="X", now=at(1))
    with store.transaction() as session:
        assert get_generation(session, TENANT, lease.generation_id).state is S.RUNNING


def test_a_queued_generation_can_be_failed_and_only_from_queued(store: Store) -> None:
    seed(store)
    queued = admitted(store, "r1")
    with store.transaction() as session:
        g = finish_queued(session, queued, state=S.FAILED, reason="NO_CAPACITY", now=at(2))
    assert (g.state, g.terminal_reason, g.finished_at) == (S.FAILED, "NO_CAPACITY", at(2))
    lease = running(store, "r2")
    with pytest.raises(IllegalTransition), store.transaction() as session:
        finish_queued(session, lease.generation_id, state=S.CANCELED, reason="CANCELED", now=at(3))
