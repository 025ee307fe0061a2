"""The catalog cache on a real control store (SQLite and PostgreSQL): an Admin write of this frontend
shows in its caches at once, and a refresh whose read overlapped that write, and so may predate
it, never puts the old value back."""

from __future__ import annotations

import pytest

from control.workers import heartbeat, set_worker_draining
from datastore.store import Store
from frontend.auth import ApiKeyStore
from frontend.catalog.cache import CatalogCache, CatalogSnapshot
from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from tests.builders import T0, VERSION_ID, add_version
from tests.control.test_workers import report
from tests.datastore.stores import backend, migrated, store

__all__ = ["backend", "migrated", "store"]


def cache_on(store: Store) -> CatalogCache:
    with store.transaction() as session:
        add_version(session)
        heartbeat(session, report("w1", 100, VERSION_ID), now=T0)
        heartbeat(session, report("w2", 100, VERSION_ID), now=T0)
    pool = WorkerPool()  # workers whose Triton clients the catalog never calls
    for worker_id in ("w1", "w2"):
        pool.add(WorkerHandle(worker_id, "127.0.0.1:1", client=None))  # type: ignore[arg-type]
    return CatalogCache(store, ModelRegistry(), ApiKeyStore(), pool, refresh_s=60.0)


async def test_a_refresh_spanning_a_local_drain_is_read_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = cache_on(store)
    assert await cache.refresh()
    worker, before = cache.pool.workers["w1"], cache.revision
    assert not worker.draining
    with store.transaction() as session:  # another frontend drains w2: the revision moves
        assert set_worker_draining(session, "w2", True, now=T0) is not None
    read = CatalogCache._read_if_moved

    def read_then_drain(self: CatalogCache) -> CatalogSnapshot | None:
        stale = read(self)  # the store before w1's drain, which commits while this read is in flight
        assert stale is not None and stale.draining == {"w2"}
        assert self.set_draining("w1", True)
        return stale

    with monkeypatch.context() as patch:
        patch.setattr(CatalogCache, "_read_if_moved", read_then_drain)
        assert not await cache.refresh()  # the stale snapshot is dropped ...
    assert worker.draining and cache.revision == before  # ... the drain stays, its revision not taken
    assert await cache.refresh()  # the next refresh reads the store again
    assert worker.draining and cache.pool.workers["w2"].draining and cache.revision > before


async def test_another_frontends_write_is_applied_by_the_next_refresh(store: Store) -> None:
    cache = cache_on(store)
    assert await cache.refresh()
    other = CatalogCache(store, ModelRegistry(), ApiKeyStore(), WorkerPool(), refresh_s=60.0)
    other.pool.add(WorkerHandle("w1", "127.0.0.1:1", client=None))  # type: ignore[arg-type]
    assert other.set_draining("w1", True)  # the store and the other frontend's caches, not this one's
    assert not cache.pool.workers["w1"].draining
    assert await cache.refresh()
    assert cache.pool.workers["w1"].draining


async def test_route_and_status_writes_through_the_registry_count_as_local(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rollout and pushes cache their committed writes through `set_route` / `set_status`: a refresh
    that spans one is dropped as well, and keeps what they cached."""
    cache = cache_on(store)
    assert await cache.refresh()
    with store.transaction() as session:  # the revision moves, so the next refresh reads
        assert set_worker_draining(session, "w2", True, now=T0) is not None
    read = CatalogCache._read_if_moved

    def read_then_write(self: CatalogCache) -> CatalogSnapshot | None:
        stale = read(self)
        self.registry.set_route("alias", {VERSION_ID: 100.0})
        self.registry.set_status(VERSION_ID, "DRAINING")
        return stale

    with monkeypatch.context() as patch:
        patch.setattr(CatalogCache, "_read_if_moved", read_then_write)
        assert not await cache.refresh()
    assert cache.registry.routes["alias"] == {VERSION_ID: 100.0}
    assert cache.registry.statuses[VERSION_ID] == "DRAINING"
    assert cache.registry.local_writes == 2
