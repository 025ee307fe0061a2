"""Keeping attempts' leases: renew those of live runs, sweep expired ones.

Every `lease_s / 3` the keeper renews the lease of every generation this frontend is running, all
in one transaction; one that is fenced off (another party ended or replaced the attempt, e.g. the
sweeper after a stall) is handed to `on_lost`, which stops the run, and one whose cancel intent is
recorded (by another frontend that could not reach this one) to `on_cancel`. Every `lease_s / 2` it
interrupts attempts whose lease expired, this frontend's or any other's: a crashed frontend's
generations end INTERRUPTED (LEASE_EXPIRED) with their usage sealed, instead of hanging.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import Protocol

from control.attempts import Lease
from datastore.store import Store
from lifecycle.attempts import renew_leases
from lifecycle.termination import sweep_abandoned_queued, sweep_expired_leases

log = logging.getLogger(__name__)


class Leased(Protocol):
    @property
    def generation_id(self) -> str: ...

    @property
    def lease(self) -> Lease | None: ...


class LeaseKeeper:
    def __init__(
        self,
        store: Store,
        lease_s: float,
        clock: Callable[[], datetime],
        live: Callable[[], Iterable[Leased]],
        on_lost: Callable[[Leased], None],
        queue_bound_s: float = 600.0,
        on_cancel: Callable[[Leased], None] = lambda _: None,
        before_sweep: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """queue_bound_s: the longest a generation may wait in a frontend's queue (the largest tier
        allowance); a QUEUED generation untouched for that plus a lease has lost its frontend."""
        self.store = store
        self.lease_s = lease_s
        self.clock = clock
        self.live = live  # the runs to renew: running, not yet closed
        self.on_lost = on_lost
        self.on_cancel = on_cancel
        self.queue_bound_s = queue_bound_s
        # e.g. the usage aggregator's flush: an attempt whose run ended while the store was away is
        # sealed only after the usage this frontend still holds for it is durable
        self.before_sweep = before_sweep
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._every(self.lease_s / 3, self.renew), name="leases"),
            asyncio.create_task(self._every(self.lease_s / 2, self.sweep), name="lease-sweeper"),
        ]

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def _every(self, period_s: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period_s)
            try:
                await job()
            except Exception:
                log.exception("background %s failed", getattr(job, "__name__", "job"))

    async def renew(self) -> None:
        live = [g for g in self.live() if g.lease is not None]
        leases = [g.lease for g in live if g.lease is not None]
        if not leases:
            return
        now, lease_for = self.clock(), timedelta(seconds=self.lease_s)
        renewal = await asyncio.to_thread(renew_leases, self.store, leases, now=now, lease_for=lease_for)
        for g in live:
            if g.generation_id in renewal.lost:
                log.warning("generation %s: lease lost, stopping it", g.generation_id)
                self.on_lost(g)
            elif g.generation_id in renewal.cancel_requested:
                log.info("generation %s: cancel recorded elsewhere, stopping it", g.generation_id)
                self.on_cancel(g)

    async def sweep(self) -> None:
        if self.before_sweep is not None:
            await self.before_sweep()
        swept = await asyncio.to_thread(self._sweep_blocking)
        if swept:
            log.warning("swept %d attempt(s) whose lease expired or queued generation(s) abandoned", swept)

    def _sweep_blocking(self) -> int:
        now = self.clock()
        abandoned = timedelta(seconds=self.queue_bound_s + self.lease_s)
        queued = sweep_abandoned_queued(self.store, now=now, older_than=abandoned)
        return len(sweep_expired_leases(self.store, now=now)) + len(queued)
