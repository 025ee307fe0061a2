"""A fleet frontend's canaries (serving/probes.py `Canaries`) to the workers its streams run on.

A stream waits for its worker's next response only while the model has not been silent, as this
frontend hears it, for `worker_inactivity_timeout_s` (frontend/dispatch/worker_liveness.py). A stream may be
silent for long on a live worker (a long prompt prefilled over many steps), and a fleet frontend
shares its workers with other frontends whose traffic it does not hear, nor the worker host's own
canaries. So, as `make serve`'s supervisor does for its workers, a model this frontend has
generations on and has heard nothing from for `interval_s` gets a canary: a live model answers it
within one engine step, which keeps every stream of this frontend to it waiting. A canary that
fails (Triton's error, a broken stream, no answer within the timeout) holds the worker back
(suspect, frontend/dispatch/worker_pool.py) until it heartbeats again; restarting it is its host's job.
"""

from __future__ import annotations

import asyncio
import logging

from frontend.background import Background
from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.worker_pool import WorkerPool
from serving.probes import Canaries

log = logging.getLogger(__name__)
RETIRING = ("DRAINING", "RETIRED")  # a host unloads such a version once its generations ended


class StreamCanaries:
    def __init__(
        self, pool: WorkerPool, registry: ModelRegistry, name: str, interval_s: float, timeout_s: float
    ) -> None:
        """name: this frontend's, in the canaries' request ids."""
        self.pool = pool
        self.registry = registry
        self.name = name
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._books: dict[str, Canaries] = {}  # worker id -> the canaries to its client
        self._background = Background("stream-canaries", self._loop)

    def check(self) -> None:
        """Reaps the canaries that ended (a failure holds its worker back) and sends those due."""
        for worker_id, handle in list(self.pool.workers.items()):
            book = self._books.get(worker_id)
            if book is None or book.client is not handle.client:  # new, or a new address
                book = self._books[worker_id] = Canaries(
                    handle.client, f"{self.name}-{worker_id}", self.interval_s, self.timeout_s
                )
            versions = self.registry.versions
            served = [versions[v] for v in handle.capacity if v in versions]
            # Triton's refusal for a retiring version: its host is unloading it
            failed = book.failure(
                v.triton_model_name for v in served if self.registry.status(v.version_id) not in RETIRING
            )
            if failed is not None:
                log.warning("worker %s: %s; holding it back until it heartbeats again", worker_id, failed)
                self.pool.lost(worker_id)
            if handle.active > 0 and handle.healthy:
                book.send_due(served)
        for worker_id in set(self._books) - set(self.pool.workers):
            del self._books[worker_id]  # its canaries end with their timeout

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()
        for book in self._books.values():
            await book.reset()
        self._books.clear()

    async def _loop(self) -> None:
        while True:
            try:
                self.check()
            except Exception:
                log.exception("stream canaries failed")
            await asyncio.sleep(self.interval_s / 2)
