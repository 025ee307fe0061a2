"""The row path of the two moves every generation makes (control/generation_rows.py): what it writes
is what the ORM then reads, and it refuses what `states.moved` refuses, writing nothing."""

from __future__ import annotations

import pytest

from control.errors import GenerationNotFound, IllegalTransition
from control.generation_rows import GenerationRow, end, lock_row, start_epoch
from control.generations import get_generation
from control.states import GenerationState
from control.termination import finish_attempt
from datastore.store import Store
from tests.builders import T0, TENANT, admitted, at, running, seed

S = GenerationState


def orm_view(store: Store, generation_id: str) -> GenerationRow:
    with store.transaction() as session:
        g = get_generation(session, TENANT, generation_id)
        return GenerationRow(
            g.id,
            g.tenant_id,
            g.state,
            g.current_epoch,
            g.cancel_requested,
            g.reserved_input_tokens,
            g.reserved_output_tokens,
            g.terminal_reason,
            g.finished_at,
        )


def test_a_finished_generation_reads_back_as_its_row_said(store: Store) -> None:
    seed(store)
    lease = running(store, input_tokens=40, output_tokens=60)
    with store.transaction() as session:
        ended = finish_attempt(session, lease, state=S.COMPLETED, reason="OUTPUT_LIMIT", now=at(7))
    expected = GenerationRow(
        lease.generation_id, TENANT, S.COMPLETED, 1, False, 40, 60, "OUTPUT_LIMIT", at(7)
    )
    assert ended == expected
    assert orm_view(store, lease.generation_id) == expected
    with store.transaction() as session:
        assert get_generation(session, TENANT, lease.generation_id).updated_at == at(7)


def test_an_unknown_generation_has_no_row(store: Store) -> None:
    seed(store)
    with pytest.raises(GenerationNotFound), store.transaction() as session:
        lock_row(session, "g-missing")


def test_a_refused_move_writes_nothing(store: Store) -> None:
    seed(store)
    queued = admitted(store, "r-queued")
    with pytest.raises(IllegalTransition), store.transaction() as session:
        end(session, lock_row(session, queued), S.COMPLETED, now=at(1), reason="OUTPUT_LIMIT")
    assert orm_view(store, queued).state is S.QUEUED

    lease = running(store, "r-done")
    with store.transaction() as session:
        finish_attempt(session, lease, state=S.FAILED, reason="BROKEN", now=at(2))
    with pytest.raises(IllegalTransition), store.transaction() as session:
        start_epoch(session, lock_row(session, lease.generation_id), 2, now=at(3))
    assert orm_view(store, lease.generation_id) == GenerationRow(
        lease.generation_id, TENANT, S.FAILED, 1, False, 50, 200, "BROKEN", at(2)
    )


def test_a_redispatch_keeps_the_generation_running_at_the_next_epoch(store: Store) -> None:
    seed(store)
    lease = running(store, now=T0)
    with store.transaction() as session:
        row = start_epoch(session, lock_row(session, lease.generation_id), 2, now=at(40))
    assert (row.state, row.current_epoch) == (S.RUNNING, 2)
    assert orm_view(store, lease.generation_id) == row
