"""Opening the store: an engine for `sqlite:///…` or `postgresql+psycopg://…`, migrated to head.

SQLite connections run in WAL mode with foreign keys on, and every transaction starts with
`BEGIN IMMEDIATE`, so writers queue instead of failing a lock upgrade midway. Within the process
they queue on one lock per engine (`_Writers`), held from BEGIN to the end of COMMIT or ROLLBACK,
whose release wakes the next at once; only another process's writers meet SQLite's busy handler,
which polls with sleeps growing from 1 to 100 ms. Why: 64 requests arriving together were admitted
over 0.78-0.96 s on 2 cores, their transactions asleep in that handler long after the lock was
free; on the lock, over 0.42-0.48 s.
Sessions do not expire objects on commit: what a transaction returned stays readable after it.

`timeout_s` bounds how long a call waits for an unreachable or locked store before it fails with
an OperationalError (the API's UNAVAILABLE/STORE_UNAVAILABLE): SQLite's busy timeout; on
PostgreSQL libpq's connect timeout (per host), TCP's user timeout for unacknowledged data, and
the pool's wait for a free connection. PostgreSQL connections are pinged at checkout, so one a
failover broke is replaced before a transaction uses it (datastore/urls.py: several hosts).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from datastore.migrations import upgrade
from datastore.urls import parse_store_url

DEFAULT_URL = "sqlite:///var/control.sqlite"
DEFAULT_TIMEOUT_S = 10.0  # [store] timeout_s


def make_engine(url: str, *, search_path: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Engine:
    """An engine for the store. `search_path` (PostgreSQL only) selects the schema, e.g. for tests."""
    if not timeout_s > 0:
        raise ValueError("timeout_s must be positive")
    parsed = parse_store_url(url)
    if parsed.backend == "sqlite":
        if search_path is not None:
            raise ValueError("search_path applies to PostgreSQL only")
        database = parsed.url.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed.url, connect_args={"timeout": timeout_s}, pool_timeout=timeout_s)
        busy_ms = int(timeout_s * 1000)
        event.listen(engine, "connect", lambda c, _r: _sqlite_connect(c, busy_ms))
        _Writers(timeout_s).install(engine)
        return engine
    if parsed.backend != "postgresql":
        raise ValueError(f"unsupported store url {parsed.url.render_as_string(hide_password=True)!r}")
    connect_args: dict[str, Any] = {
        **parsed.libpq_args(),
        "connect_timeout": max(2, round(timeout_s)),  # libpq's unit: whole seconds, at least 2
        "tcp_user_timeout": int(timeout_s * 1000),
        "keepalives_idle": max(1, round(timeout_s)),
    }
    if search_path:
        connect_args["options"] = f"-csearch_path={search_path}"
    return create_engine(parsed.url, connect_args=connect_args, pool_pre_ping=True, pool_timeout=timeout_s)


def _sqlite_connect(dbapi_connection: Any, busy_ms: int) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (see _sqlite_begin)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
    cursor.close()


class _Writers:
    """The engine's one writer at a time: a transaction takes the lock at BEGIN and gives it back
    once its COMMIT or ROLLBACK has run (the dialect's own calls, wrapped: SQLAlchemy's commit and
    rollback events come before them), or when the pool takes its connection back or drops it
    (the pool's reset rolls back an unfinished transaction; an invalidated connection is closed).
    Waiting longer than the store's timeout fails as a busy database would: OperationalError, the
    API's STORE_UNAVAILABLE."""

    def __init__(self, timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._holder: object | None = None  # the DBAPI connection whose transaction holds the lock
        self._timeout_s = timeout_s

    def install(self, engine: Engine) -> None:
        event.listen(engine, "begin", self.begin)
        event.listen(engine.pool, "checkin", lambda raw, _record: self.end(raw))
        event.listen(engine.pool, "invalidate", lambda raw, _record, _error: self.end(raw))
        dialect = engine.dialect
        commit, rollback = dialect.do_commit, dialect.do_rollback

        def do_commit(connection: Any) -> None:
            try:
                commit(connection)
            finally:
                self.end(connection)

        def do_rollback(connection: Any) -> None:
            try:
                rollback(connection)
            finally:
                self.end(connection)

        dialect.do_commit = do_commit  # type: ignore[method-assign, assignment]
        dialect.do_rollback = do_rollback  # type: ignore[method-assign, assignment]

    def begin(self, connection: Connection) -> None:
        raw = connection.connection.dbapi_connection
        if self._holder is not raw:
            if not self._lock.acquire(timeout=self._timeout_s):
                locked = sqlite3.OperationalError("database is locked")
                raise OperationalError("BEGIN IMMEDIATE", None, locked)
            self._holder = raw
        try:
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            self.end(raw)
            raise

    def end(self, connection: Any) -> None:
        """The transaction on `connection` (pooled or DBAPI) is over, if it held the lock."""
        raw = getattr(connection, "dbapi_connection", connection)
        if raw is not None and self._holder is raw:
            self._holder = None
            self._lock.release()


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


def open_store(
    url: str = DEFAULT_URL, *, search_path: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Store:
    """Opens the store and applies every pending migration (idempotent, safe to run concurrently)."""
    engine = make_engine(url, search_path=search_path, timeout_s=timeout_s)
    upgrade(engine)
    return Store(engine)
