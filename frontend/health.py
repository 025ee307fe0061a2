"""The frontend's grpc.health.v1 status, recomputed for as long as it serves (never fixed at
start-up): SERVING while every READY version is ready on at least one routable worker (healthy
by the supervisor's verdict, not draining, and its Triton reporting the model ready; a version
still loading after a push, retiring or retired is not counted) and every alias it serves has a
READY version so held (`serves_every_alias`: until then, requests would only be refused),
NOT_SERVING otherwise, and from the moment the frontend itself drains for its exit. It is
recomputed every `interval_s`, and at once when the supervisor changes a worker's health
(`WorkerPool.changed`), so a restart shows as NOT_SERVING however quickly it completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from grpc_health.v1 import health, health_pb2

from frontend.background import Background
from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.worker_pool import WorkerPool, ready_workers

log = logging.getLogger(__name__)
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def servable(registry: ModelRegistry, pool: WorkerPool) -> bool:
    """Every READY version is ready on at least one routable worker."""
    for version in list(registry.versions.values()):
        if registry.status(version.version_id) != "READY":
            continue
        if await ready_workers(pool, version) == 0:
            return False
    return True


async def serves_every_alias(registry: ModelRegistry, pool: WorkerPool) -> bool:
    """Every alias this frontend serves can be served now: one of its route's targets is loaded
    here, READY in the store, and ready on a routable worker. A version still REGISTERED (a fleet
    whose worker hosts have not loaded it yet) or held by no live worker does not count, so a
    frontend started before its workers, or one whose last worker host was lost, is NOT_SERVING."""
    for route in list(registry.routes.values()):
        targets = [registry.versions[v] for v, w in route.items() if w > 0 and v in registry.versions]
        ready = [v for v in targets if registry.status(v.version_id) == "READY"]
        if not any([await ready_workers(pool, v) > 0 for v in ready]):
            return False
    return True


class HealthCheck:
    def __init__(
        self,
        servicer: health.aio.HealthServicer,
        registry: ModelRegistry,
        pool: WorkerPool,
        services: tuple[str, ...],
        interval_s: float = 1.0,
        accepting: Callable[[], bool] = lambda: True,
        on_change: Callable[[bool], None] = lambda serving: None,
    ) -> None:
        """services: the names whose status is set, besides the server's overall one ("").
        accepting: False once the frontend admits no more work (it drains). on_change: told each
        new status (True: SERVING; the metrics count the changes)."""
        self.servicer = servicer
        self.registry = registry
        self.pool = pool
        self.services = ("", *services)
        self.interval_s = interval_s
        self.accepting = accepting
        self.on_change = on_change
        self.status: int | None = None  # the status last set
        self._background = Background("health-check", self._loop)

    async def refresh(self) -> bool:
        """Recomputes the status and sets it where it changed; True when SERVING."""
        serving = (
            self.accepting()
            and await servable(self.registry, self.pool)
            and await serves_every_alias(self.registry, self.pool)
        )
        status = SERVING if serving else NOT_SERVING
        if status != self.status:
            log.info("health: %s", health_pb2.HealthCheckResponse.ServingStatus.Name(status))
            for name in self.services:
                await self.servicer.set(name, status)
            self.status = status
            self.on_change(serving)
        return status == SERVING

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()

    async def _loop(self) -> None:
        while True:
            self.pool.changed.clear()  # a change during the refresh wakes the next one at once
            try:
                await self.refresh()
            except Exception:
                log.exception("health check failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.pool.changed.wait(), self.interval_s)
