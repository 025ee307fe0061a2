"""Is the control store reachable? A probe the frontend runs while it serves.

Every `interval_s` it runs one trivial transaction (`SELECT 1`, bounded by the store's own
timeout); the verdict feeds health (`grpc.health.v1` is NOT_SERVING while the store is
unreachable: new work cannot be admitted) and admission, which refuses at once with
UNAVAILABLE/STORE_UNAVAILABLE instead of waiting for the store's timeout on every request.
Running generations do not depend on it: they keep streaming, their usage waits in the aggregator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy import text

from datastore.store import Store
from frontend.background import Background

log = logging.getLogger(__name__)


class StoreProbe:
    def __init__(self, store: Store, interval_s: float, on_change: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.interval_s = interval_s
        self.on_change = on_change  # called when the verdict flips (health recomputes at once)
        self.available = True  # until a probe says otherwise
        self._background = Background("store-probe", self._loop)

    async def check(self) -> bool:
        """Probes once and records the verdict; True when the store answered."""
        try:
            await asyncio.to_thread(self._ping)
            available = True
        except Exception as e:  # any failure to reach it, whatever the driver raises
            if self.available:
                log.warning("control store unreachable: %s", type(e).__name__)
            available = False
        if available != self.available:
            if available:
                log.info("control store reachable again")
            self.available = available
            self.on_change()
        return available

    def _ping(self) -> None:
        with self.store.transaction() as session:
            session.execute(text("SELECT 1"))

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                await self.check()
            await asyncio.sleep(self.interval_s)
