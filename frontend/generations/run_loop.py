"""One generation's run, from its admission to its sealed end:

QUEUED   its ticket waits in the dispatcher's fair queue for a worker with room
RUNNING  the attempt starts (epoch, lease) the moment a worker has room, before the request is
         sent; events go into the generation's EventLog, pausing (pulling nothing from the
         worker) while a reader holds the log full, cancelled as SLOW_CONSUMER when too slow
ended    final usage flushed and acknowledged, then the attempt sealed (lifecycle/), then
         `finished` appended. A generation that never left the queue is ended with nothing
         billed (its whole reservation released).

With the store away at the end, `finished` waits for it up to `final_usage_wait_s` (the aggregator
keeps retrying meanwhile). If it is still away, the stream ends `finished` INTERRUPTED with the
usage generated so far, `usage_final` false: nothing was sealed. Its reports stay queued and are
written once the store returns; the attempt's lease, no longer renewed, then expires and the
sweeper, which first waits for this frontend's queued usage to be durable, ends it INTERRUPTED
sealed at that watermark: the usage the client was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from billing.aggregator import UsageAggregator
from billing.errors import UsageNotDurable
from billing.usage import UsageReport
from config.settings import FrontendSettings, StoreSettings
from control.errors import CancelRequested, ControlError, LeaseExpired
from control.states import GenerationState
from control.termination import LEASE_EXPIRED, WORKER_LOST
from datastore.retry import retrying
from datastore.store import Store
from frontend.api_errors import ApiError, api_error
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.fair_queue import Ticket
from frontend.generations.live import LiveGeneration, LiveRegistry
from frontend.generations.run import GenerationRun
from frontend.metrics import FrontendMetrics
from frontend.refusals import Refusal, Unavailable
from lifecycle.attempts import Dispatch, start_attempt
from lifecycle.termination import finish, finish_queued, interrupt, withdraw_queued, withdraw_unadmitted
from llm.v1 import generations_pb2 as pb

log = logging.getLogger(__name__)
Reason = pb.Finished.Reason
LEASE_LOST = "LEASE_LOST"  # recorded when a live run finds its attempt fenced off
# the worker an attempt is recorded on: the dispatcher may move a refused request to another worker
# of the pool after the attempt started, so an attempt is this frontend's pool's, not one worker's
ATTEMPT_WORKER = "local"
STORE_AWAY = (UsageNotDurable, OperationalError, InterfaceError, PoolTimeout)  # the store is unreachable
STORE_RETRY_S = 0.5  # between tries of a run's end while the store is away
T = TypeVar("T")
STATE_OF_REASON = {
    Reason.COMPLETED: GenerationState.COMPLETED,
    Reason.OUTPUT_LIMIT: GenerationState.COMPLETED,
    Reason.STOP_SEQUENCE: GenerationState.COMPLETED,
    Reason.CANCELED: GenerationState.CANCELED,
    Reason.FAILED: GenerationState.FAILED,
}


def rejected(metrics: FrontendMetrics, e: ApiError) -> None:
    """Counts a refused generation (the one place that does)."""
    metrics.rejections.labels(e.code.name, e.reason).inc()


@dataclass(slots=True, eq=False)
class RunLoop:
    store: Store
    aggregator: UsageAggregator
    dispatcher: Dispatcher
    live: LiveRegistry
    settings: FrontendSettings
    store_settings: StoreSettings
    clock: Callable[[], datetime]
    metrics: FrontendMetrics

    async def run(self, live: LiveGeneration, run: GenerationRun, ticket: Ticket) -> None:
        report_seq = 0
        settling: asyncio.Future[bool] | None = None  # the run ended on its own: sealing it
        pending: pb.GenerationEvent | None = None  # taken from the worker's events, not yet appended
        obs = live.observer
        assert obs is not None
        run.trace_headers = tuple(obs.dispatching().items())
        events = run.events(self.dispatcher, ticket, lambda: self._assigned(live, run))
        try:
            try:
                async for event in events:
                    pending = event
                    kind = event.WhichOneof("event")
                    if kind == "delta":
                        if event.delta.token_ids:
                            obs.tokens(len(event.delta.token_ids))
                    elif kind == "started":
                        obs.worker_admitted(run.cached_input_tokens)
                    elif kind == "finished":
                        obs.settling()
                        reason = event.finished.reason  # INTERRUPTED here: the worker stream broke
                        lost = WORKER_LOST if reason == Reason.INTERRUPTED else ""
                        settling = asyncio.ensure_future(
                            self._settle(live, run, reason, report_seq + 1, recorded=lost)
                        )
                        event = await self._settled(live, settling, event)
                    elif kind == "usage" and not run.ended:  # cumulative, to billing too
                        report_seq += 1
                        self._report(run, report_seq)
                    # the closing usage and finished never wait for room
                    timeout = self.settings.slow_consumer_timeout_s
                    too_slow = not run.ended and not await live.log.wait_for_room(timeout)
                    live.log.append(event)  # generated already: one over the limits when too slow
                    pending = None
                    if kind == "delta":
                        obs.delta_appended()
                    elif kind == "finished":
                        live.finished = True
                        obs.finished(event.finished.reason, event.finished.usage)
                    if too_slow:
                        log.info("generation %s: slow consumer (%.1fs)", live.generation_id, timeout)
                        self.live.cancel(live, "SLOW_CONSUMER")
                        await asyncio.sleep(0)  # the cancellation lands here
            except (asyncio.CancelledError, CancelRequested):
                # a further cancel (a client's second CancelGeneration, shutdown) must not cut this short
                if settling is None:
                    await uncancelled(events.aclose())  # cancelled while queued or paused: end the request
                    if pending is not None:  # generated and counted already: delivered, as it is billed
                        live.log.append(pending)
                    await uncancelled(self._close_cancelled(live, run, report_seq + 1))
                else:  # too late to cancel: its own `finished` follows once it is sealed
                    event = await uncancelled(self._settled(live, settling, event))
                    live.log.append(event)
                    live.finished = True
                    obs.finished(event.finished.reason, event.finished.usage)
            except Refusal as refused:  # refused before any event: the client gets the status
                live.error = e = api_error(refused)
                obs.refused(e.reason)
                rejected(self.metrics, e)
                retry = isinstance(refused, Unavailable)  # no worker took it: its id stays usable
                await asyncio.to_thread(self._end, live, GenerationState.FAILED, e.reason, retry)
        except Exception as e:  # never leave a reader waiting on a log that will not close
            # the one rule: a run that cannot record its end (the store is down or locked past its
            # timeout) ends its streams with the error's status (STORE_UNAVAILABLE), never silently;
            # its attempt's lease then lapses and the sweeper interrupts it at its last watermark
            log.exception("generation %s: run failed", live.generation_id)
            live.error = api_error(e)
        finally:
            obs.refused("RUN_FAILED")  # a no-op when it ended with `finished` or a refusal
            live.log.close()
            self.live.closed(live)

    @staticmethod
    async def _settled(
        live: LiveGeneration, settling: asyncio.Future[bool], finished: pb.GenerationEvent
    ) -> pb.GenerationEvent:
        """The run's own `finished` once its end is recorded: INTERRUPTED with final usage when its
        lease had lapsed meanwhile, INTERRUPTED with usage not final when the store stayed away."""
        try:
            if await asyncio.shield(settling):  # its lease lapsed: recorded INTERRUPTED
                return relabelled(finished, final=True)
        except STORE_AWAY:  # still away after final_usage_wait_s: nothing sealed
            log.warning("generation %s: store away at its end", live.generation_id)
            return relabelled(finished, final=False)
        return finished

    async def _assigned(self, live: LiveGeneration, run: GenerationRun) -> None:
        """A worker has room for it: its attempt starts (QUEUED -> RUNNING) and sets the epoch
        the worker request and every event carry. `CancelRequested` if a cancel came first."""
        dispatch = Dispatch(ATTEMPT_WORKER, timedelta(seconds=self.settings.attempt_lease_s))
        now = self.clock()  # the same on a retry: it finds its own attempt (control/attempts.py)
        starting = asyncio.ensure_future(
            asyncio.to_thread(retrying, start_attempt, self.store, live.generation_id, dispatch, now=now)
        )
        try:
            lease = await asyncio.shield(starting)
        except asyncio.CancelledError:  # cancelled meanwhile: end the attempt if it did start
            with contextlib.suppress(Exception):
                lease = await starting
                live.lease, run.epoch = lease, lease.epoch
            raise
        live.lease, run.epoch = lease, lease.epoch

    async def _close_cancelled(self, live: LiveGeneration, run: GenerationRun, seq: int) -> None:
        reason = Reason.INTERRUPTED if live.cancel_reason == LEASE_LOST else Reason.CANCELED
        events = run.closing_events(reason)
        if live.observer is not None:
            live.observer.settling()
        if await self._settle(live, run, reason, seq, recorded=live.cancel_reason):
            reason, events[-1] = Reason.INTERRUPTED, relabelled(events[-1], final=True)
        for event in events:
            live.log.append(event)
        live.finished = True
        if live.observer is not None:
            live.observer.finished(reason, events[-1].finished.usage)
        if live.cancel_requested_at is not None:  # not a shutdown
            lag = asyncio.get_running_loop().time() - live.cancel_requested_at
            self.metrics.cancellations.labels(live.cancel_reason).inc()
            self.metrics.cancellation_lag.labels(live.cancel_reason).observe(lag)

    def _report(self, run: GenerationRun, seq: int) -> None:
        u = run.usage()
        self.aggregator.report(
            UsageReport(
                run.generation_id, run.epoch, seq, u.input_tokens, u.output_tokens, u.cached_input_tokens
            )
        )

    async def _settle(
        self,
        live: LiveGeneration,
        run: GenerationRun,
        reason: pb.Finished.Reason,
        seq: int,
        recorded: str = "",
    ) -> bool:
        """Final usage flushed and acknowledged (when an attempt ran), then the generation ended in
        its terminal state (`recorded`, e.g. SLOW_CONSUMER, is stored when it says more). While the
        store is away both are retried for up to `final_usage_wait_s`; then the error is raised.
        True when the attempt's lease had lapsed meanwhile (an outage longer than the lease): it
        was recorded INTERRUPTED instead, sealed at the usage just flushed."""
        deadline = asyncio.get_running_loop().time() + self.store_settings.final_usage_wait_s
        if live.lease is not None:
            self._report(run, seq)
            await self._until(deadline, lambda: self.aggregator.flush_final(run.generation_id, run.epoch))
        state = STATE_OF_REASON.get(reason, GenerationState.INTERRUPTED)
        name = recorded or Reason.Name(reason)
        return await self._until(deadline, lambda: asyncio.to_thread(retrying, self._end, live, state, name))

    @staticmethod
    async def _until(deadline: float, step: Callable[[], Awaitable[T]]) -> T:
        """Runs `step` until it succeeds, again after each failure to reach the store, until `deadline`."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                return await step()
            except STORE_AWAY:
                if loop.time() + STORE_RETRY_S >= deadline:
                    raise
            await asyncio.sleep(STORE_RETRY_S)

    def _end(self, live: LiveGeneration, state: GenerationState, reason: str, withdraw: bool = False) -> bool:
        """Records the end (`withdraw`: refused by every worker, its first attempt goes too); True
        when the lease had lapsed and it was recorded INTERRUPTED instead."""
        now = self.clock()
        lease = live.lease
        try:
            if lease is None and state is GenerationState.CANCELED:  # nothing ran, nothing billed
                finish_queued(self.store, live.generation_id, state=state, reason=reason, now=now)
            elif lease is None:  # refused before it ran: no record left; a retry starts afresh
                withdraw_queued(self.store, live.generation_id, now=now)
            elif withdraw and lease.epoch == 1:  # no worker admitted it: likewise
                withdraw_unadmitted(self.store, lease, now=now)
            elif state is GenerationState.INTERRUPTED:
                interrupt(self.store, lease.generation_id, lease.epoch, reason=reason, now=now)
            else:
                finish(self.store, lease, state=state, reason=reason, now=now)
        except LeaseExpired:  # the store was away past the lease: it may no longer complete
            assert lease is not None
            log.warning("generation %s: lease lapsed before its end; interrupted", live.generation_id)
            with contextlib.suppress(ControlError):  # unless a sweeper ended it first
                interrupt(self.store, lease.generation_id, lease.epoch, reason=LEASE_EXPIRED, now=now)
            return True
        except ControlError as e:  # fenced out (a newer attempt, or it ended already): not ours to end
            log.warning("generation %s: terminal update rejected: %s", live.generation_id, e)
        return False


async def uncancelled(step: Awaitable[T]) -> T:
    """Awaits `step` to its end even while the task is cancelled again meanwhile: a run's clean-up
    after its first cancellation (further ones are absorbed)."""
    future = asyncio.ensure_future(step)
    while True:
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled():
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()


def relabelled(finished: pb.GenerationEvent, *, final: bool) -> pb.GenerationEvent:
    """The `finished` of a run the store recorded (final) or will record (not final) INTERRUPTED,
    its usage being what was generated: sealed, or what its queued reports will record."""
    event = pb.GenerationEvent()
    event.CopyFrom(finished)
    event.finished.reason = Reason.INTERRUPTED
    event.finished.usage_final = final
    return event
