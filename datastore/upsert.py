"""Dialect-specific INSERT, for `ON CONFLICT DO NOTHING` / `DO UPDATE` on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_for(session: Session, entity: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `entity` (a mapped class or table) in the dialect of the session's bind."""
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(entity)
    return sqlite.insert(entity)


def built_once(session: Session, cache: dict[str, Any], build: Callable[[Session], Any]) -> Any:
    """`build(session)` once per dialect of the session's bind, kept in `cache`: a statement that
    needs the dialect's INSERT (`insert_for`) and runs often is built and keyed once."""
    dialect = session.get_bind().dialect.name
    if dialect not in cache:
        cache[dialect] = build(session)
    return cache[dialect]
