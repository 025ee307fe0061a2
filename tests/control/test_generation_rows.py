"""The row path of the two moves every generation makes (control/generation_rows.py): what it writes
is what the ORM then reads, and it refuses what `states.moved` refuses, writing nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Select
from sqlalchemy.dialects import postgresql

from control import attempt_sql, generation_rows
from control.attempts import renew_lease, renew_lease_of, start_attempt
from control.cancel import request_cancel
from control.errors import CancelRequested, GenerationNotFound, IllegalTransition
from control.generation_rows import GenerationRow, end, lock_row, start_epoch
from control.generations import get_generation, lock_generation
from control.model_versions import _STATUS_FOR_SHARE
from control.states import GenerationState
from control.termination import finish_attempt
from datastore.store import Store
from tests.builders import LEASE, T0, TENANT, admitted, at, running, seed

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


def test_the_row_path_sees_and_refreshes_what_the_orm_holds_in_the_same_session(store: Store) -> None:
    seed(store)
    queued = admitted(store, "r-cancelled")
    with pytest.raises(CancelRequested), store.transaction() as session:
        request_cancel(session, TENANT, queued, now=at(1))  # pending in the session, not yet flushed
        start_attempt(session, queued, worker_id="w1", now=at(2), lease_for=LEASE)

    lease = running(store, "r-loaded")
    with store.transaction() as session:
        loaded = lock_generation(session, lease.generation_id)  # an ORM copy, RUNNING
        finish_attempt(session, lease, state=S.CANCELED, reason="CANCELED", now=at(3))
        assert (loaded.state, loaded.terminal_reason, loaded.finished_at) == (S.CANCELED, "CANCELED", at(3))
    assert orm_view(store, lease.generation_id).state is S.CANCELED


def test_a_shorter_renewal_never_shortens_a_lease(store: Store) -> None:
    seed(store)
    lease = running(store, now=T0)  # expires at 30 s
    with store.transaction() as session:
        renewed, row = renew_lease_of(session, lease, now=at(5), lease_for=timedelta(seconds=10))
    assert (renewed.expires_at, row.state, row.cancel_requested) == (at(30), S.RUNNING, False)
    with store.transaction() as session:
        again = renew_lease(session, lease, now=at(29), lease_for=timedelta(seconds=10))
    assert again.expires_at == at(39)


@pytest.mark.parametrize(
    ("statement", "lock"),
    [
        (generation_rows._LOCK, "FOR UPDATE"),
        (attempt_sql.LOCK, "FOR UPDATE"),
        (_STATUS_FOR_SHARE, "FOR SHARE"),
    ],
)
def test_the_hot_path_reads_keep_their_row_locks_on_postgresql(statement: Select[Any], lock: str) -> None:
    # SQLite ignores row locks and the suite's PostgreSQL runs have no contention here, so the
    # locking clauses are checked as compiled SQL
    assert str(statement.compile(dialect=postgresql.dialect())).rstrip().endswith(lock)
