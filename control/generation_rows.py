"""The two moves every generation makes, on its row: its attempt starts (QUEUED -> RUNNING, a new
epoch) and its attempt ends it (RUNNING -> terminal). The row is read under its lock and written by
statements built once: loading the ORM's `Generation` (whose row processor is built per query) and
flushing it cost several times their SQL, and these run for every generation. The rarer moves
(cancel, interrupt, queued ends, the sweeper) keep the ORM object (`generations.lock_generation`).
Both paths decide a move with `states.moved`, and one transaction may use both: `lock_row` writes
the session's pending changes first, and the UPDATEs expire what a loaded `Generation` held of the
columns they wrote."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import String, Table, bindparam, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.util import identity_key

from control.errors import GenerationNotFound
from control.models import Generation
from control.states import GenerationState, moved


@dataclass(slots=True, frozen=True)
class GenerationRow:
    """What the two moves read and change of a generation (and what its end reports)."""

    id: str
    tenant_id: str
    state: GenerationState
    current_epoch: int | None
    cancel_requested: bool
    reserved_input_tokens: int
    reserved_output_tokens: int
    terminal_reason: str | None
    finished_at: datetime | None


def lock_row(session: Session, generation_id: str) -> GenerationRow:
    """The generation's row under its lock (PostgreSQL `FOR UPDATE`; SQLite holds the write lock);
    `GenerationNotFound` if there is none. Changes the session holds for it are written first (a
    no-op when there are none, as in every use case the frontend runs), so the row is current."""
    session.flush()
    row = session.connection().execute(_LOCK, {"generation": generation_id}).one_or_none()
    if row is None:
        raise GenerationNotFound(generation_id)
    return GenerationRow(*row)


def start_epoch(session: Session, row: GenerationRow, epoch: int, *, now: datetime) -> GenerationRow:
    """`row` RUNNING at attempt `epoch`: from QUEUED, or again on a re-dispatch of a RUNNING one;
    `IllegalTransition` from any other state."""
    if row.state is not GenerationState.RUNNING:
        moved(row.id, row.state, GenerationState.RUNNING, now=now)
    params = {"generation": row.id, "to": GenerationState.RUNNING, "at": now, "attempt": epoch}
    session.connection().execute(_START, params)
    _expire_loaded(session, row.id, ("state", "current_epoch", "updated_at"))
    return dataclasses.replace(row, state=GenerationState.RUNNING, current_epoch=epoch)


def end(
    session: Session, row: GenerationRow, to: GenerationState, *, now: datetime, reason: str
) -> GenerationRow:
    """`row` moved to terminal `to` with `reason`; `IllegalTransition` unless the move is allowed."""
    if not to.terminal:
        raise ValueError(f"{to} is not terminal")
    reason = moved(row.id, row.state, to, now=now, reason=reason)["terminal_reason"]
    session.connection().execute(_END, {"generation": row.id, "to": to, "at": now, "reason": reason})
    _expire_loaded(session, row.id, ("state", "updated_at", "finished_at", "terminal_reason"))
    return dataclasses.replace(row, state=to, finished_at=now, terminal_reason=reason)


def _expire_loaded(session: Session, generation_id: str, columns: tuple[str, ...]) -> None:
    """A `Generation` this session loaded earlier reads the columns just written again on next
    access, instead of its stale copy (the UPDATE went past the ORM)."""
    loaded = session.identity_map.get(identity_key(Generation, generation_id))
    if loaded is not None:
        session.expire(loaded, list(columns))


_TABLE = cast(Table, Generation.__table__)
_C = _TABLE.c
_ID = _C.id == bindparam("generation", type_=String())
# Built once; parameter names never equal a column's (SQLAlchemy would take them as values to SET)
_LOCK = select(*(_C[field.name] for field in dataclasses.fields(GenerationRow))).where(_ID).with_for_update()
_START = (
    update(_TABLE)
    .where(_ID)
    .values(
        state=bindparam("to", type_=_C.state.type),
        current_epoch=bindparam("attempt"),
        updated_at=bindparam("at", type_=_C.updated_at.type),
    )
)
_END = (
    update(_TABLE)
    .where(_ID)
    .values(
        state=bindparam("to", type_=_C.state.type),
        updated_at=bindparam("at", type_=_C.updated_at.type),
        finished_at=bindparam("at", type_=_C.finished_at.type),
        terminal_reason=bindparam("reason", type_=String()),
    )
)
