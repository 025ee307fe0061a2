"""Keeps the local Triton workers running and the worker registry current.

Every `interval_s` it checks each worker: its `tritonserver` process, then its probes
(serving/probes.py: the server's identity and its models' readiness every `probe_interval_s`, a
canary to each model silent that long). A worker that failed is marked unhealthy (routing skips it
and the health check turns NOT_SERVING when no other worker serves its versions), killed with its
Python-backend stubs (its streams end INTERRUPTED, never restarted), started again and its versions
reloaded, and routable again once they are ready. A failed restart is retried after `retry_s`. Every
`heartbeat_s` it writes each worker's state (SERVING or NOT_SERVING, estimated free blocks, loaded
versions with their KV pools and prefix-cache summaries, serving/prefix_summaries.py) to the control
store's worker registry, extending each one's registration lease by `lease_s` (fleet frontends route
only to workers whose lease is live). It runs in `make serve` (beside the frontend that routes to
these workers) and in a worker host (serving/worker_host.py), where `retire()` ends the
registrations at a clean exit."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from contracts.prefix_summary import CacheSummary
from control.models import WorkerHealth
from control.workers import VersionPool, WorkerReport, heartbeat, retire_worker
from datastore.store import Store
from frontend.background import Background
from frontend.dispatch.worker_pool import WorkerPool
from serving.prefix_summaries import worker_summaries
from serving.probes import WorkerProbe
from serving.workers import LocalWorker

log = logging.getLogger(__name__)


@dataclass(slots=True, eq=False)
class Supervisor:
    workers: list[LocalWorker]
    pool: WorkerPool
    store: Store
    on_restarted: Callable[[], None] = lambda: None  # a worker is routable again (wake the waiting)
    interval_s: float = 0.5  # how often worker processes are checked
    probe_interval_s: float = 2.0  # identity and readiness probes; a model this silent gets a canary
    inactivity_timeout_s: float = 10.0  # a canary unanswered this long fails its worker
    heartbeat_s: float = 2.0  # how often the registry is written
    lease_s: float = 30.0  # each heartbeat extends a worker's registration this far
    retry_s: float = 5.0  # after a failed restart
    summary_dir: Path | None = None  # the engines' prefix-cache summaries (None: none published)
    restarts: int = 0  # completed restarts, all workers
    _next_try: dict[str, float] = field(default_factory=dict)
    _probes: dict[str, WorkerProbe] = field(default_factory=dict)
    _background: Background = field(init=False)

    def __post_init__(self) -> None:
        self._background = Background("worker-supervisor", self._loop)

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()
        for probe in self._probes.values():
            await probe.reset()

    def probe(self, worker: LocalWorker) -> WorkerProbe:
        if worker.worker_id not in self._probes:
            handle = self.pool.workers[worker.worker_id]
            self._probes[worker.worker_id] = WorkerProbe(
                worker, handle, self.probe_interval_s, self.inactivity_timeout_s
            )
        return self._probes[worker.worker_id]

    async def _loop(self) -> None:
        last_beat = 0.0
        while True:
            for worker in self.workers:
                failure = await self._failure(worker)
                if failure is not None:
                    await self._restart(worker, failure)
            now = time.monotonic()
            if now - last_beat >= self.heartbeat_s:
                last_beat = now
                try:
                    await asyncio.to_thread(self.heartbeat)
                except Exception:
                    log.exception("worker registry heartbeat failed")
            await asyncio.sleep(self.interval_s)

    async def _failure(self, worker: LocalWorker) -> str | None:
        """Why the worker must be restarted now, or None."""
        proc = worker.server.process
        if proc is None or proc.poll() is not None:
            return f"tritonserver exited ({None if proc is None else proc.returncode})"
        if not self.pool.workers[worker.worker_id].healthy:
            return "its restart has not completed"
        return await self.probe(worker).failure()

    async def _restart(self, worker: LocalWorker, failure: str) -> None:
        wid = worker.worker_id
        if self.pool.workers[wid].healthy:
            log.warning("worker %s: %s; restarting it", wid, failure)
            self.pool.set_healthy(wid, False)
        if time.monotonic() < self._next_try.get(wid, 0.0):
            return
        probe = self.probe(worker)
        await probe.reset()
        try:
            await asyncio.to_thread(_restart_blocking, worker)
        except Exception:
            log.exception("worker %s: restart failed; retrying in %.0fs", wid, self.retry_s)
            self._next_try[wid] = time.monotonic() + self.retry_s
            return
        await probe.reset()
        self.restarts += 1
        self.pool.set_healthy(wid, True)
        self.pool.workers[wid].last_heartbeat = time.time()
        log.info("worker %s restarted", wid)
        self.on_restarted()

    def heartbeat(self) -> None:
        """Writes every worker's state to the registry (the drain flag is Admin's, not written here)."""
        now = datetime.now(UTC)
        with self.store.transaction() as s:
            for handle in self.pool.workers.values():
                health = WorkerHealth.SERVING if handle.healthy else WorkerHealth.NOT_SERVING
                capacity = dict(handle.capacity)  # one snapshot: a version sync may replace it meanwhile
                loaded = tuple(sorted(capacity)) if handle.healthy else ()
                caches = self._summaries(handle.worker_id)
                handle.caches = caches  # `make serve`'s frontend routes by this very pool
                size = self.pool.block_size
                report = WorkerReport(
                    worker_id=handle.worker_id,
                    address=handle.address,
                    health=health,
                    free_blocks=max(0, sum(handle.free_blocks(v) for v in capacity)),
                    loaded_versions=loaded,
                    pools={v: VersionPool(capacity[v], size.get(v, 16), caches.get(v)) for v in loaded},
                    lease_for=timedelta(seconds=self.lease_s),
                )
                heartbeat(s, report, now=now)
                if handle.healthy:
                    handle.last_heartbeat = time.time()

    def _summaries(self, worker_id: str) -> dict[str, CacheSummary]:
        worker = next((w for w in self.workers if w.worker_id == worker_id), None)
        if worker is None or self.summary_dir is None:
            return {}
        return worker_summaries(worker, self.summary_dir)

    def retire(self) -> None:
        """Ends every worker's registration now (a worker host's clean exit; blocking)."""
        now = datetime.now(UTC)
        with self.store.transaction() as s:
            for worker_id in self.pool.workers:
                retire_worker(s, worker_id, now=now)


def _restart_blocking(worker: LocalWorker) -> None:
    worker.server.stop(kill=True)  # the worker failed: no grace; reaps its process group and shm
    worker.server.start()
    worker.load()
