from __future__ import annotations

import pytest

from billing.ledger import TenantLoad, tenant_load
from control.errors import GenerationNotFound
from control.states import GenerationState
from datastore.store import Store
from lifecycle.cancel import CancelIntent, request_cancel
from lifecycle.termination import finish, finish_queued
from tests.builders import TENANT, admitted, at, running, seed, tenant_spec

S = GenerationState


def load(store: Store) -> TenantLoad:
    with store.transaction() as session:
        return tenant_load(session, TENANT)


def test_a_canceled_queued_generation_ends_and_frees_its_reservation(store: Store) -> None:
    seed(store)
    generation_id = admitted(store)
    first = request_cancel(store, TENANT, generation_id, now=at(1))
    assert first == CancelIntent(generation_id, S.QUEUED, already_terminal=False, first_request=True)
    assert load(store) == TenantLoad(1, 250)
    finish_queued(store, generation_id, state=S.CANCELED, reason="CANCELED", now=at(1))
    after = request_cancel(store, TENANT, generation_id, now=at(2))
    assert load(store) == TenantLoad(0, 0)
    assert (after.already_terminal, after.first_request, after.state) == (True, False, S.CANCELED)


def test_a_canceled_running_generation_ends_through_its_attempt(store: Store) -> None:
    seed(store)
    lease = running(store)
    intent = request_cancel(store, TENANT, lease.generation_id, now=at(1))
    again = request_cancel(store, TENANT, lease.generation_id, now=at(2))
    assert (intent.first_request, again.first_request, intent.state) == (True, False, S.RUNNING)
    ended = finish(store, lease, state=S.CANCELED, reason="CANCELED", now=at(2))
    assert (ended.state, ended.terminal_reason) == (S.CANCELED, "CANCELED")
    assert ended.bill is not None and ended.bill.sealed
    assert load(store) == TenantLoad(0, 0)


def test_another_tenants_generation_cannot_be_canceled(store: Store) -> None:
    seed(store, tenant_spec("a"), tenant_spec("b"))
    generation_id = admitted(store, tenant_id="a")
    with pytest.raises(GenerationNotFound):
        request_cancel(store, "b", generation_id, now=at(1))
