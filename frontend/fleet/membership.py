"""A fleet frontend's registration in the store (control/frontends.py): announced before it serves,
renewed every third of its lease while it runs (so the others forward Resume and Cancel of its
generations to its relay), marked draining on SIGTERM, and retired at a clean exit. A frontend
killed outright stops renewing: once its lease expires it is gone, and the others answer for its
generations from the store."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from control.frontends import FrontendReport, announce_frontend, prune_frontends, retire_frontend
from datastore.store import Store
from frontend.background import Background

log = logging.getLogger(__name__)
PRUNE_AFTER = timedelta(days=1)  # registrations expired this long ago are deleted at start-up


class Membership:
    def __init__(
        self,
        store: Store,
        frontend_id: str,
        relay_address: str,
        lease_s: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.frontend_id = frontend_id
        self.relay_address = relay_address
        self.lease_s = lease_s
        self.clock = clock
        self.draining = False
        self._background = Background("frontend-membership", self._renew)

    def announce(self) -> None:
        """Registers (or renews) this frontend now (blocking: one transaction)."""
        report = FrontendReport(
            self.frontend_id, self.relay_address, timedelta(seconds=self.lease_s), self.draining
        )
        with self.store.transaction() as session:
            announce_frontend(session, report, now=self.clock())

    def join(self) -> None:
        """The first announcement, with old registrations pruned (blocking)."""
        with self.store.transaction() as session:
            prune_frontends(session, expired_before=self.clock() - PRUNE_AFTER)
        self.announce()

    async def drain(self) -> None:
        self.draining = True
        await asyncio.to_thread(self.announce)

    def start(self) -> None:
        self._background.start()

    async def leave(self) -> None:
        """Stops renewing and ends the registration (a clean exit)."""
        await self._background.close()

        def retire() -> None:
            with self.store.transaction() as session:
                retire_frontend(session, self.frontend_id, now=self.clock())

        try:
            await asyncio.to_thread(retire)
        except Exception:  # the lease then runs out on its own
            log.exception("frontend %s: could not retire its registration", self.frontend_id)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await asyncio.to_thread(self.announce)
            except Exception:
                log.exception("frontend %s: registration renewal failed", self.frontend_id)
