"""Dispatch: which Triton worker runs a generation, and when (the pool is frontend/dispatch/worker_pool.py).

    Dispatcher  dispatch(ticket, request): waits in the FairQueue until a routable worker holding
                the pinned version has room for the ticket's blocks (bounded by the tier's queue
                allowance; room goes to waiting tickets in fair order, and one too big for the
                room left does not hold back smaller ones), sends the request, and on a refusal
                tries the next worker; UNAVAILABLE when none takes it. The estimate is released
                when the generation ends.

A worker's free blocks are estimated from its configured pool minus the blocks reserved by the
generations this frontend sent it (the worker's own reservation is the authority: a refusal moves
on to the next worker).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from contracts.tier import Tier
from frontend.dispatch.fair_queue import FairQueue, Ticket, WaitPredictor
from frontend.dispatch.prefix_routing import remember
from frontend.dispatch.worker_client import (
    WorkerCapacityError,
    WorkerChunk,
    WorkerError,
    WorkerLost,
    WorkerRequest,
)
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from frontend.refusals import InternalFailure, Unavailable

log = logging.getLogger(__name__)
REFUSED_BACKOFF_S = 0.05  # first wait after every worker refused for memory (doubling, to 1 s)


@dataclass(slots=True)
class Dispatched:
    worker: WorkerHandle
    chunks: AsyncIterator[WorkerChunk]  # the rest of the worker's stream
    first: WorkerChunk  # its admission response (or first tokens)


class Dispatcher:
    def __init__(
        self,
        pool: WorkerPool,
        predictor: WaitPredictor | None = None,
        queue_wait_s: dict[Tier, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pool = pool
        self.predictor = predictor or WaitPredictor()
        self.queue_wait_s = queue_wait_s or {Tier.INTERACTIVE: 1.0, Tier.BATCH: 600.0}  # per tier
        self.clock = clock
        self._queue = FairQueue()
        self._waiting: dict[str, tuple[Ticket, asyncio.Future[WorkerHandle]]] = {}
        self._started: set[str] = set()
        self._versions: dict[str, str] = {}  # generation id -> pinned version, while queued
        self._arriving: dict[str, Ticket] = {}  # recorded QUEUED here, not yet in the queue
        self._assigning: set[str] = set()  # handed room, its attempt not yet started (still QUEUED)

    # --- admission --------------------------------------------------------------------------

    def check_deadline(self, ticket: Ticket) -> None:
        """UNAVAILABLE when the predicted wait before this ticket's prefill exceeds its tier's
        allowance (a batch-tier request has a far larger one)."""
        wait = self.predictor.predict_wait_s(
            ticket.tenant_id, ticket.weight, ticket.tier, ticket.prompt_tokens
        )
        allowed = self.queue_wait_s[ticket.tier]
        if wait > allowed:
            raise Unavailable(
                "QUEUE_DEADLINE",
                f"predicted queue wait {wait:.1f}s exceeds the {_tier(ticket.tier)} allowance {allowed:.1f}s"
                + (" (the BATCH tier accepts longer waits)" if ticket.tier == Tier.INTERACTIVE else ""),
                retry_after_s=max(1.0, wait - allowed),
            )

    def arriving(self, ticket: Ticket) -> None:
        """Its generation is being admitted here (recorded QUEUED, on its way to dispatch): until
        it joins the queue or `arrived()`, queued() answers the place it would take."""
        self._arriving[ticket.generation_id] = ticket

    def arrived(self, generation_id: str) -> None:
        """It joined the queue, or will not (refused, ended): forgets it as arriving."""
        self._arriving.pop(generation_id, None)

    def queued(self, generation_id: str) -> tuple[int, float] | None:
        """(1-based position in the fair queue, predicted wait in s) while the generation waits here
        for worker room, is on its way to, or has just been handed room (1, 0: its attempt is
        starting); None when it is not waiting."""
        waiting = self._waiting.get(generation_id)
        if waiting is not None:
            ticket = waiting[0]
            order = [t.generation_id for t in self._queue.in_order()]
            position = order.index(generation_id) + 1 if generation_id in order else 1
        elif (arriving := self._arriving.get(generation_id)) is not None:
            ticket, position = arriving, self._queue.place(arriving)
        elif generation_id in self._assigning:  # out of the queue, its attempt starting: next
            return 1, 0.0
        else:
            return None
        wait = self.predictor.predict_wait_s(
            ticket.tenant_id, ticket.weight, ticket.tier, ticket.prompt_tokens
        )
        return position, wait

    def waiting_by_tier(self) -> dict[Tier, int]:
        """Tickets waiting for worker room, or on their way to the queue, per tier."""
        counts: dict[Tier, int] = {}
        for t in [*self._queue.in_order(), *self._arriving.values()]:
            counts[t.tier] = counts.get(t.tier, 0) + 1
        return counts

    def started(self, ticket: Ticket, cached_tokens: int) -> None:
        """Its first token arrived: the prefill is done."""
        if ticket.generation_id not in self._started:
            self._started.add(ticket.generation_id)
            self.predictor.started(ticket, cached_tokens, self.clock())

    # --- dispatch ---------------------------------------------------------------------------

    @asynccontextmanager
    async def dispatch(
        self,
        ticket: Ticket,
        request: Callable[[], WorkerRequest],
        version_id: str,
        on_assigned: Callable[[], Awaitable[None]] | None = None,
    ) -> AsyncIterator[Dispatched]:
        """A worker's admitted stream for the request; its blocks are released on exit.

        The ticket waits in the fair queue until a worker has room; then `on_assigned` runs (the
        generation's attempt starts: QUEUED -> RUNNING) and `request()` builds what is sent."""
        worker: WorkerHandle | None = None
        self.predictor.add(ticket, self.clock())  # its prompt joins the predicted backlog
        deadline = self.clock() + self.queue_wait_s[ticket.tier]
        backoff = REFUSED_BACKOFF_S
        try:
            worker = await self._acquire(ticket, version_id, deadline)
            self._assigning.add(ticket.generation_id)
            try:
                if on_assigned is not None:
                    await on_assigned()
            finally:
                self._assigning.discard(ticket.generation_id)
            sent = request()
            tried: set[str] = set()
            while True:
                chunks = worker.client.generate(sent)
                try:
                    first = await anext(chunks)
                    break
                except (WorkerCapacityError, WorkerLost, StopAsyncIteration) as e:
                    await chunks.aclose()
                    log.info(
                        "generation %s: worker %s did not take it (%s)",
                        ticket.generation_id,
                        worker.worker_id,
                        type(e).__name__,
                    )
                    tried.add(worker.worker_id)
                    if isinstance(e, WorkerLost):
                        self.pool.lost(worker.worker_id)
                    self._release(worker, ticket, version_id)
                    worker = self.pool.with_room(
                        version_id, ticket.blocks, frozenset(tried), ticket.tenant_id, ticket.prefix
                    )
                    if worker is not None:
                        self._reserve(worker, ticket, version_id)
                        continue
                    if not isinstance(e, WorkerCapacityError) or self.clock() >= deadline:
                        raise _refused(e) from e
                    # every worker refused for memory our estimate says is free: a cancelled
                    # sequence's blocks are freed at the worker's next step. Wait, then queue again.
                    await asyncio.sleep(backoff)
                    backoff = min(2 * backoff, 1.0)
                    tried.clear()
                    worker = await self._acquire(ticket, version_id, deadline)
                except WorkerError as e:
                    await chunks.aclose()
                    raise InternalFailure("WORKER_REJECTED", f"the worker rejected the request: {e}") from e
            try:
                yield Dispatched(worker, chunks, first)
            finally:
                await chunks.aclose()  # cancels the worker request if it is still running
        finally:
            if worker is not None:
                self._release(worker, ticket, version_id)
            if ticket.generation_id in self._started:
                self._started.discard(ticket.generation_id)
            else:
                self.predictor.dropped(ticket, self.clock())

    async def _acquire(self, ticket: Ticket, version_id: str, deadline: float) -> WorkerHandle:
        self.arrived(ticket.generation_id)  # from here it waits in the queue, or is refused
        routable = self.pool.routable(version_id)
        if not routable:
            raise Unavailable("NO_WORKER", f"no ready worker holds {version_id} now")
        if ticket.blocks > max(w.capacity[version_id] for w in routable):
            raise Unavailable(
                "WORKER_CAPACITY", f"needs {ticket.blocks} KV blocks, more than any worker's pool holds"
            )
        cap = max(w.tenant_cap(version_id, self.pool.tenant_share) for w in routable)
        if ticket.blocks > cap:
            raise Unavailable(
                "TENANT_KV_SHARE",
                f"needs {ticket.blocks} KV blocks; one tenant may hold at most {cap} of a worker's pool",
            )
        future: asyncio.Future[WorkerHandle] = asyncio.get_running_loop().create_future()
        self._queue.push(ticket)
        self._waiting[ticket.generation_id] = (ticket, future)
        self._versions[ticket.generation_id] = version_id
        self.pump()
        allowed = self.queue_wait_s[ticket.tier]
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(0.0, deadline - self.clock()))
        except TimeoutError:
            if future.done():  # handed room just as the allowance ran out
                return future.result()
            free = max((w.free_blocks(version_id) for w in self.pool.routable(version_id)), default=0)
            raise Unavailable(
                "WORKER_CAPACITY",
                f"needs {ticket.blocks} KV blocks and no worker had them free (within the tenant's "
                f"share) in the {_tier(ticket.tier)} allowance ({allowed:.1f}s; the most free now is {free})",
            ) from None
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # room was handed over: give it back
                self._release(future.result(), ticket, version_id)
            raise
        finally:
            if not future.done():
                self._queue.remove(ticket)
                future.cancel()
            self._waiting.pop(ticket.generation_id, None)
            self._versions.pop(ticket.generation_id, None)
            self.pump()  # the head may have left

    def pump(self) -> None:
        """Hands free room to waiting tickets in fair order; one that does not fit yet does not
        hold back smaller ones behind it (each waits at most its tier's allowance)."""
        for t in self._queue.in_order():
            version_id = self._versions[t.generation_id]
            worker = self.pool.with_room(version_id, t.blocks, tenant=t.tenant_id, prefix=t.prefix)
            if worker is None:
                continue
            self._queue.take(t)
            _, future = self._waiting[t.generation_id]
            self._reserve(worker, t, version_id)
            future.set_result(worker)

    def _reserve(self, worker: WorkerHandle, ticket: Ticket, version_id: str) -> None:
        worker.reserved[version_id] = worker.reserved.get(version_id, 0) + ticket.blocks
        key = (version_id, ticket.tenant_id)
        worker.by_tenant[key] = worker.by_tenant.get(key, 0) + ticket.blocks
        worker.active += 1
        worker.dispatched += 1
        remember(worker, version_id, ticket.prefix)

    def _release(self, worker: WorkerHandle, ticket: Ticket, version_id: str) -> None:
        worker.reserved[version_id] -= ticket.blocks
        worker.by_tenant[(version_id, ticket.tenant_id)] -= ticket.blocks
        worker.active -= 1
        self.pump()


def _tier(tier: Tier) -> str:
    return tier.name.lower()


def _refused(e: BaseException) -> Unavailable:
    if isinstance(e, WorkerCapacityError):
        return Unavailable("WORKER_CAPACITY", f"no worker capacity for this request now: {e}")
    return Unavailable("WORKER_UNAVAILABLE", "no worker could take the request")
