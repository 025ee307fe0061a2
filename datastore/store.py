"""Opening the store: an engine for `sqlite:///…` or `postgresql+psycopg://…`, migrated to head.

SQLite connections run in WAL mode with foreign keys on, and every transaction starts with
`BEGIN IMMEDIATE`, so writers queue on the busy timeout instead of failing a lock upgrade midway.
Sessions do not expire objects on commit: what a transaction returned stays readable after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from datastore.migrations import upgrade

DEFAULT_URL = "sqlite:///var/control.sqlite"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str, *, search_path: str | None = None) -> Engine:
    """An engine for the store. `search_path` (PostgreSQL only) selects the schema, e.g. for tests."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if search_path is not None:
            raise ValueError("search_path applies to PostgreSQL only")
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"unsupported store url {parsed.render_as_string(hide_password=True)!r}")
    connect_args = {"options": f"-csearch_path={search_path}"} if search_path else {}
    return create_engine(parsed, connect_args=connect_args, pool_pre_ping=True)


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (see _sqlite_begin)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


class Store:
    """An engine and its session factory; `transaction()` is one unit of work."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessions: sessionmaker[Session] = sessionmaker(engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on any exception."""
        with self.sessions.begin() as session:
            yield session

    def close(self) -> None:
        self.engine.dispose()


def open_store(url: str = DEFAULT_URL, *, search_path: str | None = None) -> Store:
    """Opens the store and applies every pending migration (idempotent, safe to run concurrently)."""
    engine = make_engine(url, search_path=search_path)
    upgrade(engine)
    return Store(engine)
