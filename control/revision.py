"""The catalog revision: one counter that every catalog write bumps in its own transaction.

Frontends cache the catalog (tenants and keys, model versions, alias routes, worker drain flags) and
poll `current_revision` every few seconds; a new value means "reload". A counter rather than
PostgreSQL LISTEN/NOTIFY: it works on SQLite too, needs no long-lived connection, and a missed poll
only delays a reload (it is never lost).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from control.models import CatalogRevision
from datastore.upsert import insert_for

ROW = 1  # the only row


def bump_revision(session: Session, *, now: datetime) -> None:
    """Moves the revision on by one (the caller's transaction commits it with the change)."""
    bumped = session.execute(
        update(CatalogRevision)
        .where(CatalogRevision.id == ROW)
        .values(revision=CatalogRevision.revision + 1, updated_at=now)
    )
    if bumped.rowcount == 0:  # type: ignore[attr-defined]
        session.execute(
            insert_for(session, CatalogRevision)
            .values(id=ROW, revision=1, updated_at=now)
            .on_conflict_do_update(index_elements=["id"], set_={"revision": CatalogRevision.revision + 1})
        )


def current_revision(session: Session) -> int:
    """0 for a store no catalog write has touched yet."""
    return session.scalar(select(CatalogRevision.revision).where(CatalogRevision.id == ROW)) or 0
