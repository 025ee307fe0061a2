"""A fleet frontend's worker pool, as a cache of the store's worker registry (control/workers.py).

Refresh rule: every `refresh_s` the live registrations are read and the pool made equal to them: a
worker that registered is added (a Triton client to its advertised address), one whose address
changed gets a new client, its health, drain flag, KV pools and prefix-cache summaries follow its
last heartbeat, and one whose registration lease expired (its host died or stopped) is dropped. A
dropped worker's client is closed once none of this frontend's generations runs there any more: an
expired lease stops new routing, it does not cut streams that still flow (a dead worker's streams
break on their own and end INTERRUPTED, frontend/generations/run.py). A worker held suspect (its
stream broke at dispatch, frontend/dispatch/worker_pool.py) is routed to again once a heartbeat
newer than that arrives."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from control.models import WorkerHealth
from control.workers import RegisteredWorker, registered_workers
from datastore.store import Store
from frontend.background import Background
from frontend.dispatch.worker_client import TritonWorker
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool

log = logging.getLogger(__name__)


class WorkerDirectory:
    def __init__(
        self,
        store: Store,
        pool: WorkerPool,
        connect: Callable[[str], TritonWorker],
        refresh_s: float,
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """connect: a client for a worker's address. on_change: called after a refresh that changed
        what is routable (the dispatcher hands the new room to waiting requests)."""
        self.store = store
        self.pool = pool
        self.connect = connect
        self.refresh_s = refresh_s
        self.on_change = on_change
        self.clock = clock
        self._dropped: list[WorkerHandle] = []  # out of the pool, clients open until their streams end
        self._background = Background("worker-directory", self._poll)
        pool.holds_suspects = True

    async def refresh(self) -> None:
        def read() -> list[RegisteredWorker]:
            with self.store.transaction() as session:
                return registered_workers(session, now=self.clock())

        self.apply(await asyncio.to_thread(read))
        await self._close_idle()

    def apply(self, registered: list[RegisteredWorker]) -> bool:
        """Makes the pool equal to `registered`; True when anything routable changed."""
        changed = False
        for r in registered:
            handle = self.pool.workers.get(r.worker_id)
            if handle is not None and handle.address != r.address:
                self._drop(handle)
                handle = None
            if handle is None:
                handle = WorkerHandle(r.worker_id, r.address, self.connect(r.address))
                self.pool.add(handle)
                log.info("worker %s registered at %s", r.worker_id, r.address)
                changed = True
            changed |= self._update(handle, r)
        for worker_id in set(self.pool.workers) - {r.worker_id for r in registered}:
            log.warning("worker %s: registration expired; no longer routed to", worker_id)
            self._drop(self.pool.workers[worker_id])
            changed = True
        if changed:
            self.pool.changed.set()
            self.on_change()
        return changed

    def _update(self, handle: WorkerHandle, r: RegisteredWorker) -> bool:
        before = (handle.healthy, handle.draining, handle.suspect_since, dict(handle.capacity))
        heartbeat = r.last_heartbeat.timestamp()
        if handle.suspect_since is not None and heartbeat > handle.suspect_since:
            handle.suspect_since = None
        handle.healthy = r.health is WorkerHealth.SERVING
        handle.draining = r.draining
        handle.capacity = {version_id: pool.kv_blocks for version_id, pool in r.pools.items()}
        for version_id, pool in r.pools.items():
            self.pool.block_size[version_id] = pool.block_size
        handle.caches = {v: pool.cache for v, pool in r.pools.items() if pool.cache is not None}
        handle.last_heartbeat = heartbeat
        return before != (handle.healthy, handle.draining, handle.suspect_since, handle.capacity)

    def _drop(self, handle: WorkerHandle) -> None:
        if self.pool.workers.get(handle.worker_id) is handle:
            del self.pool.workers[handle.worker_id]
        self._dropped.append(handle)

    async def _close_idle(self) -> None:
        idle = [h for h in self._dropped if h.active == 0]
        self._dropped = [h for h in self._dropped if h.active > 0]
        for handle in idle:
            await handle.client.close()

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        """Stops refreshing and closes every client (the pool's and the dropped ones')."""
        await self._background.close()
        handles = [*self._dropped, *self.pool.workers.values()]
        self._dropped = []
        self.pool.workers.clear()
        for handle in handles:
            await handle.client.close()

    async def _poll(self) -> None:
        while True:
            try:
                await self.refresh()
            except Exception:  # the store may be briefly unreachable: keep the pool, try again
                log.exception("worker registry refresh failed")
            await asyncio.sleep(self.refresh_s)
