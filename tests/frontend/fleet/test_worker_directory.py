"""A fleet frontend's pool follows the store's worker registry (frontend/fleet/worker_directory.py), on
both store backends, with fake Triton clients."""

from __future__ import annotations

from datetime import datetime, timedelta

from control.models import WorkerHealth
from control.workers import VersionPool, WorkerReport, heartbeat, registered_workers, set_worker_draining
from datastore.store import Store
from frontend.dispatch.worker_pool import WorkerPool
from frontend.fleet.worker_directory import WorkerDirectory
from tests.builders import VERSION_ID, add_version, at
from tests.datastore.stores import migrated, store

__all__ = ["migrated", "store"]
LEASE = timedelta(seconds=6)


class FakeClient:
    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def beat(
    store: Store, worker_id: str, address: str, now: datetime, health: WorkerHealth = WorkerHealth.SERVING
) -> None:
    report = WorkerReport(
        worker_id, address, health, 40, (VERSION_ID,), {VERSION_ID: VersionPool(40, 32)}, LEASE
    )
    with store.transaction() as session:
        heartbeat(session, report, now=now)


def directory(store: Store, clock: list[datetime]) -> tuple[WorkerDirectory, WorkerPool, list[FakeClient]]:
    pool, made = WorkerPool(), []

    def connect(address: str) -> FakeClient:
        made.append(FakeClient(address))
        return made[-1]

    d = WorkerDirectory(store, pool, connect, 0.5, clock=lambda: clock[0])  # type: ignore[arg-type]
    return d, pool, made


async def test_registered_workers_join_the_pool_with_their_pools_and_leave_when_their_lease_expires(
    store: Store,
) -> None:
    with store.transaction() as session:
        add_version(session)
    beat(store, "w1", "127.0.0.1:1", at(0))
    beat(store, "w2", "127.0.0.1:2", at(3), WorkerHealth.NOT_SERVING)
    clock = [at(1)]
    d, pool, made = directory(store, clock)
    assert pool.holds_suspects
    await d.refresh()
    assert sorted(pool.workers) == ["w1", "w2"]
    w1 = pool.workers["w1"]
    assert (w1.address, w1.capacity, w1.healthy, pool.block_size[VERSION_ID]) == (
        "127.0.0.1:1",
        {VERSION_ID: 40},
        True,
        32,
    )
    assert not pool.workers["w2"].healthy and [w.worker_id for w in pool.routable(VERSION_ID)] == ["w1"]
    w1.active = 1  # a generation of this frontend still runs there
    clock[0] = at(7)  # w1's lease (0 + 6 s) has expired, w2's (3 + 6 s) has not
    await d.refresh()
    assert sorted(pool.workers) == ["w2"] and not made[0].closed  # its stream goes on
    w1.active = 0
    await d.refresh()
    assert made[0].closed
    await d.close()
    assert all(c.closed for c in made) and pool.workers == {}


async def test_a_new_address_gets_a_new_client_and_drain_flags_follow_the_store(store: Store) -> None:
    with store.transaction() as session:
        add_version(session)
    beat(store, "w1", "127.0.0.1:1", at(0))
    clock = [at(1)]
    d, pool, made = directory(store, clock)
    await d.refresh()
    beat(store, "w1", "127.0.0.1:9", at(2))  # restarted on another port under the same name
    with store.transaction() as session:
        set_worker_draining(session, "w1", True, now=at(2))
    clock[0] = at(3)
    await d.refresh()
    assert [c.address for c in made] == ["127.0.0.1:1", "127.0.0.1:9"] and made[0].closed
    assert pool.workers["w1"].draining and pool.routable(VERSION_ID) == []
    await d.close()


async def test_a_suspect_worker_is_routed_to_again_after_a_newer_heartbeat(store: Store) -> None:
    with store.transaction() as session:
        add_version(session)
    beat(store, "w1", "127.0.0.1:1", at(0))
    clock = [at(1)]
    d, pool, _ = directory(store, clock)
    await d.refresh()
    pool.lost("w1")
    pool.workers["w1"].suspect_since = at(1).timestamp()
    await d.refresh()  # no heartbeat since: still held back
    assert pool.routable(VERSION_ID) == []
    beat(store, "w1", "127.0.0.1:1", at(2))
    clock[0] = at(2)
    with store.transaction() as session:
        assert d.apply(registered_workers(session, now=clock[0])) is True
    assert [w.worker_id for w in pool.routable(VERSION_ID)] == ["w1"]
    await d.close()
