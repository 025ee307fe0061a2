"""The attempts table's statements (control/attempts.py), built once with bind parameters: every
generation starts, fences and ends an attempt, and every lease renewal fences one, so a statement
built per call (or a unit-of-work flush) would cost more Python than its SQL.

Parameter names never equal a column name of the table written: SQLAlchemy would take a parameter
of that name as a value to SET."""

from __future__ import annotations

from typing import cast

from sqlalchemy import String, Table, bindparam, insert, select, update

from control.models import Attempt

ATTEMPTS = cast(Table, Attempt.__table__)
_KEY = (
    ATTEMPTS.c.generation_id == bindparam("generation", type_=String()),
    ATTEMPTS.c.epoch == bindparam("attempt"),
)

INSERT = insert(ATTEMPTS).values(
    generation_id=bindparam("generation", type_=String()),
    epoch=bindparam("attempt"),
    worker_id=bindparam("worker", type_=String()),
    started_at=bindparam("at", type_=ATTEMPTS.c.started_at.type),
    lease_expires_at=bindparam("until", type_=ATTEMPTS.c.lease_expires_at.type),
)
# FOR UPDATE on PostgreSQL; SQLite's writer holds the database's write lock already
LOCK = (
    select(
        ATTEMPTS.c.epoch,
        ATTEMPTS.c.worker_id,
        ATTEMPTS.c.started_at,
        ATTEMPTS.c.lease_expires_at,
        ATTEMPTS.c.ended_at,
    )
    .where(*_KEY)
    .with_for_update()
)
# an attempt that ended keeps its own end
END = (
    update(ATTEMPTS)
    .where(*_KEY, ATTEMPTS.c.ended_at.is_(None))
    .values(
        ended_at=bindparam("at", type_=ATTEMPTS.c.ended_at.type),
        outcome=bindparam("result", type_=ATTEMPTS.c.outcome.type),
        terminal_reason=bindparam("reason", type_=String()),
    )
)
RENEW = (
    update(ATTEMPTS)
    .where(*_KEY)
    .values(lease_expires_at=bindparam("until", type_=ATTEMPTS.c.lease_expires_at.type))
)
