from __future__ import annotations

import pytest

from control.cancel import request_cancel
from control.errors import GenerationNotFound
from control.generations import get_generation
from control.states import GenerationState
from control.termination import finish_attempt
from datastore.store import Store
from tests.builders import TENANT, admitted, at, running, seed, tenant_spec

S = GenerationState


def test_cancel_intent_is_recorded_once(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    with store.transaction() as session:
        first = request_cancel(session, TENANT, generation_id, now=at(1))
    with store.transaction() as session:
        again = request_cancel(session, TENANT, generation_id, now=at(2))
    assert (first.first_request, first.already_terminal) == (True, False)
    assert (again.first_request, again.already_terminal) == (False, False)
    with store.transaction() as session:
        g = get_generation(session, TENANT, generation_id)
    assert (g.state, g.cancel_requested, g.cancel_requested_at) == (S.QUEUED, True, at(1))


def test_canceling_a_running_generation_reaches_canceled_through_its_attempt(store: Store) -> None:
    seed(store)
    lease = running(store)
    with store.transaction() as session:
        outcome = request_cancel(session, TENANT, lease.generation_id, now=at(1))
    assert (outcome.first_request, outcome.generation.state) == (True, S.RUNNING)
    with store.transaction() as session:
        finish_attempt(session, lease, state=S.CANCELED, reason="CANCELED", now=at(2))
    with store.transaction() as session:
        g = get_generation(session, TENANT, lease.generation_id)
    assert (g.state, g.terminal_reason, g.cancel_requested_at) == (S.CANCELED, "CANCELED", at(1))


def test_canceling_a_finished_generation_reports_its_terminal_state(store: Store) -> None:
    seed(store)
    lease = running(store)
    with store.transaction() as session:
        finish_attempt(session, lease, state=S.COMPLETED, reason="STOP_SEQUENCE", now=at(2))
    with store.transaction() as session:
        outcome = request_cancel(session, TENANT, lease.generation_id, now=at(3))
    g = outcome.generation
    assert (outcome.already_terminal, outcome.first_request) == (True, False)
    assert (g.state, g.terminal_reason, g.cancel_requested, g.cancel_requested_at) == (
        S.COMPLETED,
        "STOP_SEQUENCE",
        False,
        None,
    )


def test_another_tenants_generation_cannot_be_canceled(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    generation_id = admitted(store, tenant_id="a")
    with pytest.raises(GenerationNotFound), store.transaction() as session:
        request_cancel(session, "b", generation_id, now=at(1))
    with store.transaction() as session:
        assert get_generation(session, "a", generation_id).cancel_requested is False
