"""Serialising writers that create rows another process may be creating at the same moment (e.g.
two frontends seeding the catalog from one config as they start together): a transaction-level
lock on a key, held until the transaction ends. PostgreSQL takes an advisory lock; on SQLite every
transaction starts with BEGIN IMMEDIATE (datastore/store.py), which serialises writers already."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session


def exclusive(session: Session, key: int) -> None:
    """Waits until no other transaction holds `key`, then holds it until this one ends."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
