"""The health check over fake workers: SERVING only while every registered version is ready on a
routable worker, recomputed for as long as the server runs, at once when a worker's health changes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace

from grpc_health.v1 import health, health_pb2

from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from frontend.health import NOT_SERVING, SERVING, HealthCheck

V1, V2 = "m@1", "m@2"


class FakeClient:
    def __init__(self, *ready: str) -> None:
        self.ready = set(ready)  # Triton model names its server reports ready

    async def is_model_ready(self, model: str) -> bool:
        return model in self.ready


def registry(*version_ids: str) -> ModelRegistry:
    reg = ModelRegistry()
    for v in version_ids:
        reg.versions[v] = SimpleNamespace(version_id=v, triton_model_name=f"triton-{v}")  # type: ignore[assignment]
    return reg


def pool_of(**workers: tuple[FakeClient, tuple[str, ...]]) -> WorkerPool:
    pool = WorkerPool()
    for wid, (client, versions) in workers.items():
        pool.add(WorkerHandle(wid, wid, client, capacity=dict.fromkeys(versions, 100)))  # type: ignore[arg-type]
    return pool


def check_of(reg: ModelRegistry, pool: WorkerPool) -> tuple[HealthCheck, health.aio.HealthServicer]:
    servicer = health.aio.HealthServicer()
    return HealthCheck(servicer, reg, pool, ("llm.v1.Generations",), interval_s=60.0), servicer


async def status(servicer: health.aio.HealthServicer, service: str = "") -> int:
    response = await servicer.Check(health_pb2.HealthCheckRequest(service=service), None)
    return response.status


async def test_serving_needs_every_version_ready_on_a_routable_worker() -> None:
    both = FakeClient("triton-m@1", "triton-m@2")
    pool = pool_of(w1=(both, (V1, V2)))
    check, servicer = check_of(registry(V1, V2), pool)
    assert await check.refresh()
    assert await status(servicer) == await status(servicer, "llm.v1.Generations") == SERVING
    both.ready.discard("triton-m@2")  # Triton reports one model not ready
    assert not await check.refresh()
    assert await status(servicer) == await status(servicer, "llm.v1.Generations") == NOT_SERVING
    both.ready.add("triton-m@2")
    pool.workers["w1"].draining = True  # ready, but not routable
    assert not await check.refresh()
    pool.workers["w1"].draining = False
    assert await check.refresh()


async def test_a_version_loading_retiring_or_retired_is_not_required() -> None:
    pool = pool_of(w1=(FakeClient("triton-m@1"), (V1,)))  # V2 is on no worker
    reg = registry(V1, V2)
    check, _ = check_of(reg, pool)
    assert not await check.refresh()  # V2 READY (no status recorded means READY)
    for status_of_v2 in ("REGISTERED", "DRAINING", "RETIRED"):
        reg.statuses[V2] = status_of_v2
        assert await check.refresh(), status_of_v2
    reg.statuses[V2] = "READY"
    assert not await check.refresh()


async def test_another_worker_keeps_it_serving_while_one_is_down() -> None:
    pool = pool_of(w1=(FakeClient("triton-m@1"), (V1,)), w2=(FakeClient("triton-m@1"), (V1,)))
    check, _ = check_of(registry(V1), pool)
    pool.set_healthy("w1", False)
    assert await check.refresh()
    pool.set_healthy("w2", False)
    assert not await check.refresh()


async def test_the_running_check_follows_a_worker_down_and_back_at_once() -> None:
    """The interval is a minute: only the pool's change signal can move the status here."""
    pool = pool_of(w1=(FakeClient("triton-m@1"), (V1,)))
    check, servicer = check_of(registry(V1), pool)
    check.start()
    try:
        await until(lambda: check.status == SERVING)
        pool.set_healthy("w1", False)  # the supervisor found it hung: restarting it
        await until(lambda: check.status == NOT_SERVING)
        assert await status(servicer) == NOT_SERVING
        pool.set_healthy("w1", True)
        await until(lambda: check.status == SERVING)
        assert await status(servicer) == SERVING
    finally:
        await check.close()


async def until(condition: Callable[[], bool], bound_s: float = 30.0) -> None:
    """Waits for a condition; the bound is against a hang only."""
    async with asyncio.timeout(bound_s):
        while not condition():
            await asyncio.sleep(0.01)


async def test_every_served_alias_needs_a_ready_version_on_a_routable_worker() -> None:
    """A fleet frontend started before its worker hosts: the alias' only version is recorded but
    not READY yet, so no READY version is missing, and yet nothing could be served."""
    reg = registry(V1, V2)
    reg.routes = {"m": {V1: 1.0}, "canary": {V1: 0.9, V2: 0.1}}
    reg.statuses = {V1: "REGISTERED", V2: "REGISTERED"}
    client = FakeClient("triton-m@1", "triton-m@2")
    pool = pool_of(w1=(client, (V1, V2)))
    check, servicer = check_of(reg, pool)
    assert not await check.refresh()
    assert await status(servicer) == NOT_SERVING
    reg.statuses[V2] = "READY"  # "canary" has a READY target now, "m" still none
    assert not await check.refresh()
    reg.statuses[V1] = "READY"
    assert await check.refresh()
    pool.workers["w1"].healthy = False  # the last worker lost: READY versions held by no one
    assert not await check.refresh()
    pool.workers["w1"].healthy = True
    client.ready.discard("triton-m@1")  # "canary" is still served by its READY V2, "m" is not
    reg.statuses[V1] = "DRAINING"
    assert not await check.refresh()
    reg.routes["m"] = {V1: 0.0, V2: 1.0}  # the operator moved "m" to V2
    assert await check.refresh()
