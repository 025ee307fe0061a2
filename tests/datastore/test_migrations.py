from __future__ import annotations

import threading
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, select, text

from billing.models import UsageEvent, Watermark
from control.models import Generation, Tenant
from datastore.base import Base
from datastore.migrations import current, downgrade, heads, upgrade
from datastore.store import Store
from tests.builders import T0, running, seed
from tests.datastore.stores import BACKENDS, empty_engine

ALL_TABLES = {t.name for t in Base.metadata.sorted_tables}
BILLING_TABLES = {"usage_watermarks", "usage_events", "reservations", "tenant_ledgers", "rate_windows"}
TENANCY_TABLES = {"tenant_changes", "key_rate_windows", "model_prices", "budget_periods"}


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def add_rows(engine: Engine) -> None:
    """A tenant, a version, a running generation and one usage event: data in every kind of table."""
    store = Store(engine)
    seed(store)
    lease = running(store, "r1")
    with store.transaction() as session:
        session.add(
            UsageEvent(
                generation_id=lease.generation_id,
                epoch=1,
                sequence=1,
                input_tokens=5,
                output_tokens=7,
                cached_input_tokens=0,
                recorded_at=T0,
            )
        )


def test_a_single_head() -> None:
    assert heads() == ("0007_cache_summaries",)


@pytest.mark.parametrize("backend", BACKENDS)
def test_upgrade_from_empty_matches_the_models(backend: str, tmp_path: Path) -> None:
    with empty_engine(backend, tmp_path) as engine:
        assert current(engine) is None
        upgrade(engine)
        assert current(engine) == "0007_cache_summaries"
        assert tables(engine) == ALL_TABLES
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert diff == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_downgrade_to_base_and_up_again_with_data_present(backend: str, tmp_path: Path) -> None:
    with empty_engine(backend, tmp_path) as engine:
        upgrade(engine)
        add_rows(engine)
        downgrade(engine, "0005")
        assert tables(engine) == ALL_TABLES - TENANCY_TABLES
        downgrade(engine, "0004")
        assert tables(engine) == ALL_TABLES - TENANCY_TABLES - {"model_changes"}
        downgrade(engine, "0003")
        assert tables(engine) == ALL_TABLES - TENANCY_TABLES - {"frontends", "model_changes"}
        downgrade(engine, "0002")
        assert tables(engine) == ALL_TABLES - TENANCY_TABLES - {
            "catalog_revisions",
            "frontends",
            "model_changes",
        }
        downgrade(engine, "0001")
        assert current(engine) == "0001"
        assert tables(engine) == ALL_TABLES - BILLING_TABLES - TENANCY_TABLES - {
            "catalog_revisions",
            "frontends",
            "model_changes",
        }
        with Store(engine).transaction() as session:
            assert session.scalars(select(Generation.request_id)).all() == ["r1"]
        downgrade(engine, "base")
        assert current(engine) is None
        assert tables(engine) == set()
        upgrade(engine)
        assert tables(engine) == ALL_TABLES
        with Store(engine).transaction() as session:
            assert session.scalars(select(Tenant)).all() == []
            assert session.scalars(select(Watermark)).all() == []
        add_rows(engine)
        with Store(engine).transaction() as session:
            assert session.scalars(select(UsageEvent.output_tokens)).all() == [7]


@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrent_upgrades_migrate_once(backend: str, tmp_path: Path) -> None:
    with empty_engine(backend, tmp_path) as engine:
        errors: list[BaseException] = []
        start = threading.Barrier(3)

        def run() -> None:
            try:
                start.wait()
                upgrade(engine)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=run) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert current(engine) == "0007_cache_summaries"
        assert tables(engine) == ALL_TABLES


def test_upgrade_is_idempotent(store: Store) -> None:
    upgrade(store.engine)
    assert current(store.engine) == "0007_cache_summaries"


@pytest.mark.parametrize("backend", BACKENDS)
def test_0003_turns_a_draining_health_into_the_drain_flag_and_back(backend: str, tmp_path: Path) -> None:
    with empty_engine(backend, tmp_path) as engine:
        upgrade(engine, "0002")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO workers (id, address, health, free_blocks, last_heartbeat) "
                    "VALUES ('w1', '127.0.0.1:1', 'DRAINING', 5, :t), ('w2', '127.0.0.1:2', 'SERVING', 5, :t)"
                ),
                {"t": T0},
            )
        upgrade(engine)
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, health, draining FROM workers ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [("w1", "SERVING", True), ("w2", "SERVING", False)]
        downgrade(engine, "0002")
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, health FROM workers ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [("w1", "DRAINING"), ("w2", "SERVING")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_0004_adds_owners_worker_leases_and_pools_and_takes_them_back(backend: str, tmp_path: Path) -> None:
    """Rows written before 0004 read as: no owner, no lease (so not routed to by a fleet frontend),
    a pool of 0 blocks of 16 tokens; downgrading drops the new columns and keeps the rows."""
    with empty_engine(backend, tmp_path) as engine:
        upgrade(engine)
        add_rows(engine)
        downgrade(engine, "0005")
        assert tables(engine) == ALL_TABLES - TENANCY_TABLES
        downgrade(engine, "0004")
        assert tables(engine) == ALL_TABLES - TENANCY_TABLES - {"model_changes"}
        downgrade(engine, "0003")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO workers (id, address, health, free_blocks, last_heartbeat, draining) "
                    "VALUES ('w1', '127.0.0.1:1', 'SERVING', 5, :t, FALSE)"
                ),
                {"t": T0},
            )
            connection.execute(
                text(
                    "INSERT INTO worker_versions (worker_id, model_version_id) "
                    "SELECT 'w1', id FROM model_versions"
                )
            )
        upgrade(engine)
        with engine.connect() as connection:
            owners = connection.execute(text("SELECT owner_frontend_id FROM generations")).all()
            lease = connection.execute(text("SELECT lease_expires_at FROM workers")).all()
            pools = connection.execute(text("SELECT kv_blocks, block_size FROM worker_versions")).all()
        assert [tuple(r) for r in owners] == [(None,)]
        assert [tuple(r) for r in lease] == [(None,)]
        assert [tuple(r) for r in pools] == [(0, 16)]
        downgrade(engine, "0003")
        with engine.connect() as connection:
            columns = {c["name"] for c in inspect(connection).get_columns("worker_versions")}
            rows = connection.execute(text("SELECT request_id FROM generations")).all()
        assert columns == {"worker_id", "model_version_id"}
        assert [tuple(r) for r in rows] == [("r1",)]
        assert "frontends" not in tables(engine)
