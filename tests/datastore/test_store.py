from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError, StatementError

from control.models import ApiKey, Tenant
from datastore.store import Store, make_engine, open_store
from tests.builders import T0, add_tenant


def test_connections_are_configured(store: Store) -> None:
    with store.engine.connect() as connection:
        if store.dialect == "sqlite":
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        else:
            assert str(connection.execute(text("SELECT current_schema()")).scalar()).startswith("t_")


def test_foreign_keys_are_enforced(store: Store) -> None:
    with pytest.raises(IntegrityError), store.transaction() as session:
        session.add(ApiKey(id="key_0", key_sha256="0" * 64, tenant_id="nobody", created_at=T0))


def test_times_round_trip_as_aware_utc(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    with store.transaction() as session:
        tenant = add_tenant(session)
        tenant.updated_at = datetime(2030, 1, 1, 14, 30, 5, 123456, tzinfo=plus_two)
    with store.transaction() as session:
        stored = session.scalars(select(Tenant.updated_at)).one()
        later = session.scalars(select(Tenant.id).where(Tenant.updated_at > T0)).all()
    assert stored == datetime(2030, 1, 1, 12, 30, 5, 123456, tzinfo=UTC)
    assert stored.tzinfo is not None and stored.utcoffset() == timedelta(0)
    assert later == ["acme"]


def test_naive_times_are_refused(store: Store) -> None:
    with pytest.raises(StatementError, match="naive datetime"), store.transaction() as session:
        tenant = add_tenant(session)
        tenant.updated_at = datetime(2030, 1, 1)
        session.flush()


def test_transaction_rolls_back_on_error(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as session:
        add_tenant(session)
        session.flush()
        raise RuntimeError("abort")
    with store.transaction() as session:
        assert session.scalars(select(Tenant)).all() == []


def test_sqlite_store_creates_its_folder_and_migrates(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'var' / 'nested' / 'control.sqlite'}")
    try:
        assert (tmp_path / "var" / "nested" / "control.sqlite").is_file()
        with store.transaction() as session:
            assert session.scalars(select(Tenant)).all() == []
    finally:
        store.close()


def test_unsupported_urls_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsupported store url"):
        make_engine("mysql://u@localhost/db")
    with pytest.raises(ValueError, match="PostgreSQL only"):
        make_engine(f"sqlite:///{tmp_path / 'x.sqlite'}", search_path="t_x")
