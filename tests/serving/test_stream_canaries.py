"""A fleet frontend's canaries over fake clients (serving/stream_canaries.py): only to workers its
streams run on, only to models it has not heard from for the interval, and a failed one holds the
worker back until its next heartbeat."""

from __future__ import annotations

import asyncio

from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.worker_client import WorkerDown, WorkerLost
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from serving.stream_canaries import StreamCanaries
from tests.serving.test_probes import HANG, VERSION, Clock, FakeClient


def fleet_pool(**clients: FakeClient) -> tuple[WorkerPool, ModelRegistry]:
    pool, registry = WorkerPool(), ModelRegistry()
    pool.holds_suspects = True
    for worker_id, client in clients.items():
        pool.add(WorkerHandle(worker_id, worker_id, client, capacity={VERSION.version_id: 40}))  # type: ignore[arg-type]
    registry.add_version(VERSION)  # type: ignore[arg-type]
    return pool, registry


async def until(condition: object) -> None:
    async with asyncio.timeout(60):  # hang guard
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0)


async def test_a_silent_model_with_streams_of_this_frontend_gets_a_canary() -> None:
    clock = Clock()
    busy, idle = FakeClient(clock), FakeClient(clock)
    pool, registry = fleet_pool(busy=busy, idle=idle)
    pool.workers["busy"].active = 1
    canaries = StreamCanaries(pool, registry, "f1", interval_s=2.0, timeout_s=30.0)
    canaries.check()
    assert busy.sent == [] and idle.sent == []  # both just seen: nothing due yet
    clock.now = 2.0
    canaries.check()
    canaries.check()  # one in flight per model at a time
    await until(lambda: busy.liveness_of("m--1").silent_s() == 0)  # its answer is a sign of life
    assert [r.generation_id for r in busy.sent] == ["canary-f1-busy-1"] and idle.sent == []
    await canaries.close()


async def test_a_failed_canary_holds_its_worker_back() -> None:
    clock = Clock()
    dead, hung = FakeClient(clock, WorkerLost("worker stream broke")), FakeClient(clock, HANG)
    pool, registry = fleet_pool(dead=dead, hung=hung)
    for handle in pool.workers.values():
        handle.active = 1
    canaries = StreamCanaries(pool, registry, "f1", interval_s=2.0, timeout_s=0.01)
    canaries.check()  # heard from just now: nothing due
    clock.now = 2.0
    canaries.check()
    await until(lambda: all(c.closed for c in (dead, hung)))  # both canaries ended, failed
    canaries.check()
    assert {w: h.suspect_since is not None for w, h in pool.workers.items()} == {"dead": True, "hung": True}
    assert pool.routable(VERSION.version_id) == []
    await canaries.close()


async def test_a_canary_refused_as_its_version_retires_holds_nothing_back() -> None:
    clock = Clock()
    refused = WorkerDown("Request for unknown model: 'm--1' is not found")
    retiring, serving = FakeClient(clock, refused), FakeClient(clock, refused)
    pool, registry = fleet_pool(retiring=retiring)
    pool.workers["retiring"].active = 1
    registry.set_status(VERSION.version_id, "DRAINING")  # its host unloads it once its generations end
    canaries = StreamCanaries(pool, registry, "f1", interval_s=2.0, timeout_s=0.01)
    canaries.check()  # heard from just now: nothing due
    clock.now = 2.0
    canaries.check()
    await until(lambda: retiring.closed)  # refused, as a canary to a model being unloaded is
    canaries.check()  # the worker's heartbeat still lists the version: the host unloads it first
    assert pool.workers["retiring"].suspect_since is None
    await canaries.close()

    pool, registry = fleet_pool(serving=serving)  # the same refusal for a READY version
    pool.workers["serving"].active = 1
    canaries = StreamCanaries(pool, registry, "f1", interval_s=2.0, timeout_s=0.01)
    canaries.check()
    clock.now = 4.0
    canaries.check()
    await until(lambda: serving.closed)
    canaries.check()
    assert pool.workers["serving"].suspect_since is not None
    await canaries.close()
