from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from contracts.prefix_summary import CacheSummary
from control.models import WorkerHealth
from control.revision import current_revision
from control.workers import (
    VersionPool,
    WorkerReport,
    draining_workers,
    heartbeat,
    list_workers,
    prune_workers,
    ready_workers,
    registered_workers,
    retire_worker,
    set_worker_draining,
)
from datastore.store import Store
from tests.builders import T0, VERSION_ID, add_version, at, version_spec

H = WorkerHealth
STALE = timedelta(seconds=10)


def report(worker_id: str, free: int, *versions: str, health: H = H.SERVING) -> WorkerReport:
    return WorkerReport(worker_id, f"127.0.0.1:{8000 + len(worker_id)}", health, free, versions)


def test_heartbeats_replace_what_a_worker_advertises(store: Store) -> None:
    v2 = version_spec(version="v2", weights="w2").version_id
    with store.transaction() as session:
        add_version(session)
        add_version(session, version_spec(version="v2", weights="w2"))
        heartbeat(session, report("w1", 100, VERSION_ID), now=T0)
    with store.transaction() as session:
        worker = heartbeat(session, report("w1", 40, v2), now=at(5))
        assert (worker.free_blocks, worker.last_heartbeat, worker.health) == (40, at(5), H.SERVING)
    with store.transaction() as session:
        [(worker, loaded)] = list_workers(session)
    assert (worker.id, loaded) == ("w1", (v2,))


def test_ready_workers_are_fresh_serving_and_loaded_most_free_first(store: Store) -> None:
    with store.transaction() as session:
        add_version(session)
        heartbeat(session, report("a", 10, VERSION_ID), now=at(5))
        heartbeat(session, report("b", 50, VERSION_ID), now=at(5))
        heartbeat(session, report("c", 90, VERSION_ID), now=T0)  # stale at at(10)
        heartbeat(session, report("d", 99, VERSION_ID, health=H.NOT_SERVING), now=at(5))
        heartbeat(session, report("e", 99), now=at(5))  # nothing loaded
        heartbeat(session, report("f", 50, VERSION_ID), now=at(5))
    with store.transaction() as session:
        ready = [w.id for w in ready_workers(session, VERSION_ID, now=at(10), stale_after=STALE)]
        assert ready == ["b", "f", "a"]
        set_worker_draining(session, "b", True, now=at(10))
        assert set_worker_draining(session, "zz", True, now=at(10)) is None
    with store.transaction() as session:
        assert [w.id for w in ready_workers(session, VERSION_ID, now=at(10), stale_after=STALE)] == ["f", "a"]


def test_the_drain_flag_is_the_operators_and_heartbeats_keep_it(store: Store) -> None:
    with store.transaction() as session:
        add_version(session)
        heartbeat(session, report("a", 10, VERSION_ID), now=T0)
        before = current_revision(session)
        set_worker_draining(session, "a", True, now=at(1))
        assert current_revision(session) == before + 1
        set_worker_draining(session, "a", True, now=at(2))  # no change: no new revision
        assert current_revision(session) == before + 1
    with store.transaction() as session:
        worker = heartbeat(session, report("a", 10, VERSION_ID), now=at(3))
        assert (worker.health, worker.draining) == (H.SERVING, True)
        assert draining_workers(session) == {"a"}
        set_worker_draining(session, "a", False, now=at(4))
    with store.transaction() as session:
        assert draining_workers(session) == frozenset()
        assert [w.id for w in ready_workers(session, VERSION_ID, now=at(5), stale_after=STALE)] == ["a"]


def test_unknown_versions_and_negative_capacity_are_refused(store: Store) -> None:
    with pytest.raises(IntegrityError), store.transaction() as session:
        heartbeat(session, report("w1", 1, "nope@v0"), now=T0)
    with pytest.raises(ValueError, match="non-negative"):
        report("w1", -1)


def test_a_heartbeat_registers_each_versions_pool_and_extends_the_lease(store: Store) -> None:
    lease = timedelta(seconds=6)
    with store.transaction() as session:
        add_version(session)
        pools = {VERSION_ID: VersionPool(40, 16)}
        heartbeat(session, replace(report("w1", 40, VERSION_ID), pools=pools, lease_for=lease), now=T0)
        heartbeat(session, replace(report("w2", 40, VERSION_ID), lease_for=lease), now=at(3))
    with store.transaction() as session:
        live = registered_workers(session, now=at(5))
        assert [(w.worker_id, w.lease_expires_at, dict(w.pools)) for w in live] == [
            ("w1", at(6), {VERSION_ID: VersionPool(40, 16)}),
            ("w2", at(9), {VERSION_ID: VersionPool(0, 16)}),  # a report without pools: empty ones
        ]
        assert [w.worker_id for w in registered_workers(session, now=at(6))] == ["w2"]  # w1 expired
        heartbeat(session, replace(report("w1", 10, VERSION_ID), pools=pools, lease_for=lease), now=at(7))
        assert [w.worker_id for w in registered_workers(session, now=at(8))] == ["w1", "w2"]


def test_a_retired_worker_is_not_registered_and_keeps_its_drain_flag(store: Store) -> None:
    with store.transaction() as session:
        add_version(session)
        heartbeat(session, report("w1", 10, VERSION_ID), now=T0)
        set_worker_draining(session, "w1", True, now=T0)
        retire_worker(session, "w1", now=at(1))
        retire_worker(session, "unknown", now=at(1))
    with store.transaction() as session:
        assert registered_workers(session, now=at(1)) == []
        [(worker, loaded)] = list_workers(session)
        assert (worker.health, worker.draining, loaded) == (H.NOT_SERVING, True, ())


def test_pruning_deletes_long_expired_registrations_but_drained_ones(store: Store) -> None:
    with store.transaction() as session:
        add_version(session)
        for worker_id in ("old", "drained", "fresh"):
            heartbeat(session, replace(report(worker_id, 1, VERSION_ID), lease_for=STALE), now=T0)
        heartbeat(session, replace(report("fresh", 1, VERSION_ID), lease_for=STALE), now=at(100))
        set_worker_draining(session, "drained", True, now=T0)
        assert prune_workers(session, expired_before=at(50)) == 1
    with store.transaction() as session:
        assert [w.id for w, _ in list_workers(session)] == ["drained", "fresh"]
        assert prune_workers(session, expired_before=at(50)) == 0


def test_a_heartbeat_publishes_each_versions_cache_summary(store: Store) -> None:
    summary = CacheSummary("compat:float32", 16, frozenset({b"\x01" * 8, b"\x02" * 8}))
    with store.transaction() as session:
        add_version(session)
        pools = {VERSION_ID: VersionPool(40, 16, summary)}
        heartbeat(session, replace(report("w1", 40, VERSION_ID), pools=pools), now=T0)
        heartbeat(session, replace(report("w2", 40, VERSION_ID)), now=T0)
    with store.transaction() as session:
        live = {w.worker_id: w.pools[VERSION_ID].cache for w in registered_workers(session, now=at(1))}
        assert live == {"w1": summary, "w2": None}  # w2 published none
        emptied = {VERSION_ID: VersionPool(40, 16, CacheSummary("compat:float32", 16))}
        heartbeat(session, replace(report("w1", 40, VERSION_ID), pools=emptied), now=at(2))
        [w1, _] = registered_workers(session, now=at(3))
        assert w1.pools[VERSION_ID].cache == CacheSummary("compat:float32", 16)  # replaced, not merged
