"""Store fixtures shared by the store tests (datastore, control, billing, lifecycle): every test runs
on SQLite and PostgreSQL.

PostgreSQL (CI: 127.0.0.1:5432, database `test`, trust auth) gets a uniquely named schema per test
session, dropped at the end, so concurrent runs never collide. An unreachable server fails the
tests; nothing is skipped.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

import billing.models  # noqa: F401  (registers every table on Base.metadata)
import control.models  # noqa: F401
from datastore.base import Base
from datastore.scratch import scratch_schema
from datastore.store import Store, make_engine, open_store

POSTGRES_URL = os.environ.get(
    "CONTROL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("sqlite", "postgresql")


def postgres_schema() -> AbstractContextManager[str]:
    """A fresh schema `t_<hex>`, dropped with everything in it on exit."""
    return scratch_schema(POSTGRES_URL)


@contextmanager
def empty_engine(backend: str, directory: Path) -> Iterator[Engine]:
    """An engine on an empty database (a new SQLite file or a new PostgreSQL schema)."""
    if backend == "sqlite":
        engine = make_engine(f"sqlite:///{directory / f'{secrets.token_hex(4)}.sqlite'}")
        try:
            yield engine
        finally:
            engine.dispose()
        return
    with postgres_schema() as schema:
        engine = make_engine(POSTGRES_URL, search_path=schema)
        try:
            yield engine
        finally:
            engine.dispose()


@contextmanager
def migrated_store(backend: str, directory: Path) -> Iterator[Store]:
    if backend == "sqlite":
        store = open_store(f"sqlite:///{directory / 'control.sqlite'}")
        try:
            yield store
        finally:
            store.close()
        return
    with postgres_schema() as schema:
        store = open_store(POSTGRES_URL, search_path=schema)
        try:
            yield store
        finally:
            store.close()


def clear(store: Store) -> None:
    """Deletes every row of every table (not the Alembic version)."""
    tables = Base.metadata.sorted_tables
    with store.engine.begin() as connection:
        if store.dialect == "postgresql":
            names = ", ".join(f'"{t.name}"' for t in tables)
            connection.execute(text(f"TRUNCATE {names} CASCADE"))
        else:
            for table in reversed(tables):
                connection.execute(table.delete())


@pytest.fixture(scope="session", params=BACKENDS)
def migrated(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with migrated_store(request.param, tmp_path_factory.mktemp("store")) as store:
        yield store


@pytest.fixture
def store(migrated: Store) -> Iterator[Store]:
    """The migrated store of one backend, emptied after the test."""
    yield migrated
    clear(migrated)


@pytest.fixture
def backend(migrated: Store) -> str:
    return migrated.dialect
