"""Keeps the local Triton workers running and the worker registry current.

Every `interval_s` it checks each worker's process: one that has died is marked unhealthy (routing
skips it; its streams have already ended INTERRUPTED, never restarted), then restarted and its
versions reloaded, and routable again once they are ready. A failed restart is retried after
`retry_s`. Every `heartbeat_s` it writes each worker's state (SERVING or NOT_SERVING,
estimated free blocks, loaded versions) to the control store's worker registry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from control.models import WorkerHealth
from control.workers import WorkerReport, heartbeat
from datastore.store import Store
from frontend.background import Background
from frontend.routing import Dispatcher
from frontend.worker_pool import WorkerHandle, WorkerPool
from serving.workers import LocalWorker

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Supervisor:
    workers: list[LocalWorker]
    pool: WorkerPool
    store: Store
    dispatcher: Dispatcher
    interval_s: float = 0.5  # how often worker processes are checked
    heartbeat_s: float = 2.0  # how often the registry is written
    retry_s: float = 5.0  # after a failed restart
    restarts: int = 0  # completed restarts, all workers
    _next_try: dict[str, float] = field(default_factory=dict)
    _background: Background = field(init=False)

    def __post_init__(self) -> None:
        self._background = Background("worker-supervisor", self._loop)

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()

    async def _loop(self) -> None:
        last_beat = 0.0
        while True:
            for worker in self.workers:
                proc = worker.server.process
                if proc is None or proc.poll() is not None:
                    await self._restart(worker, self.pool.workers[worker.worker_id])
            now = time.monotonic()
            if now - last_beat >= self.heartbeat_s:
                last_beat = now
                try:
                    await asyncio.to_thread(self.heartbeat)
                except Exception:
                    log.exception("worker registry heartbeat failed")
            await asyncio.sleep(self.interval_s)

    async def _restart(self, worker: LocalWorker, handle: WorkerHandle) -> None:
        if handle.healthy:
            proc = worker.server.process
            log.warning(
                "worker %s exited (%s); restarting it",
                worker.worker_id,
                None if proc is None else proc.returncode,
            )
            handle.healthy = False
        if time.monotonic() < self._next_try.get(worker.worker_id, 0.0):
            return
        try:
            await asyncio.to_thread(_restart_blocking, worker)
        except Exception:
            log.exception("worker %s: restart failed; retrying in %.0fs", worker.worker_id, self.retry_s)
            self._next_try[worker.worker_id] = time.monotonic() + self.retry_s
            return
        self.restarts += 1
        handle.healthy = True
        handle.last_heartbeat = time.time()
        log.info("worker %s restarted", worker.worker_id)
        self.dispatcher.pump()

    def heartbeat(self) -> None:
        """Writes every worker's state to the registry (the drain flag is Admin's, not written here)."""
        now = datetime.now(UTC)
        with self.store.transaction() as s:
            for handle in self.pool.workers.values():
                health = WorkerHealth.SERVING if handle.healthy else WorkerHealth.NOT_SERVING
                report = WorkerReport(
                    worker_id=handle.worker_id,
                    address=handle.address,
                    health=health,
                    free_blocks=max(0, sum(handle.free_blocks(v) for v in handle.capacity)),
                    loaded_versions=tuple(sorted(handle.capacity)) if handle.healthy else (),
                )
                heartbeat(s, report, now=now)
                if handle.healthy:
                    handle.last_heartbeat = time.time()


def _restart_blocking(worker: LocalWorker) -> None:
    worker.server.stop()  # reaps what is left of the old process group and its shared memory
    worker.server.start()
    worker.load()
