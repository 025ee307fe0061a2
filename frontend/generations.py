"""Generations in the frontend: recorded identity, a run decoupled from client streams, its
retained event log, cancellation, and durable usage.

    start()  -> create-or-get (tenant, request_id) with the effective-payload hash, reserve the
                tenant budget and start an attempt (epoch, lease) in one transaction; then run the
                generation in its own task, appending events to an EventLog that any number of
                client streams follow (Generate from sequence 1, Resume from a cursor)
    cancel() -> persist the intent, then stop the run; the engine drops it at the next step
    get()    -> the recorded state, tenant-scoped

Usage goes to the billing aggregator every `usage_every_tokens` tokens; the final watermark is
flushed and acknowledged, and the attempt sealed, before `finished` is appended. A run whose client
streams all disconnect is cancelled after `grace_s` unless a Resume follows it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
from opentelemetry import trace
from opentelemetry.trace import Tracer

from billing.aggregator import UsageAggregator
from billing.errors import QuotaExceeded
from billing.ledger import reserve
from billing.tenant_usage import generation_usage
from billing.usage import UsageReport
from control.attempts import Lease, start_attempt
from control.cancel import request_cancel
from control.errors import ControlError, GenerationNotFound, RequestIdConflict
from control.generations import NewGeneration, create_or_get_generation, find_by_request_id, get_generation
from control.lifecycle import GenerationState
from control.models import Generation
from control.store import Store
from control.termination import finish_attempt, interrupt_attempt
from frontend.admission import Ticket
from frontend.auth import Tenant
from frontend.errors import ApiError
from frontend.generation import GenerationRun
from frontend.leases import LeaseKeeper
from frontend.metrics import FrontendMetrics
from frontend.registry import ServedVersion
from frontend.routing import Dispatcher
from frontend.stream_log import EventLog
from frontend.telemetry import GenerationObserver, observe_generation
from frontend.validation import ValidatedRequest
from llm.v1 import generations_pb2 as pb

log = logging.getLogger(__name__)
Reason = pb.Finished.Reason
LEASE_LOST = "LEASE_LOST"  # recorded when a live run finds its attempt fenced off
DISCONNECTED = "DISCONNECTED"  # recorded when no client came back within the grace period
STATE_OF_REASON = {
    Reason.COMPLETED: GenerationState.COMPLETED,
    Reason.OUTPUT_LIMIT: GenerationState.COMPLETED,
    Reason.STOP_SEQUENCE: GenerationState.COMPLETED,
    Reason.CANCELED: GenerationState.CANCELED,
    Reason.FAILED: GenerationState.FAILED,
}


@dataclass(slots=True, frozen=True)
class GatewaySettings:
    worker_id: str = "local"
    lease_s: float = 60.0  # attempt lease; live runs renew theirs every lease_s / 3
    grace_s: float = 10.0  # a run with no client stream is cancelled after this
    retain_s: float = 300.0  # a finished generation's events stay resumable this long
    max_events: int = 4096  # per generation's retained log
    max_bytes: int = 4 << 20
    usage_every_tokens: int = 32  # usage event + billing report cadence, in output tokens ...
    usage_every_s: float = 2.0  # ... or seconds (with new tokens), whichever comes first
    slow_consumer_timeout_s: float = 30.0  # a run paused this long for a reader is cancelled


@dataclass(slots=True)
class LiveGeneration:
    generation_id: str
    tenant_id: str
    log: EventLog
    task: asyncio.Task[None] | None = None
    error: ApiError | None = None  # the run was refused before its first event
    closed_at: float | None = None  # loop time the log closed
    clients: int = 0  # client streams (Generate, Resume) following it now
    cancel_reason: str = "CANCELED"  # recorded terminal reason when its task is cancelled
    lease: Lease | None = None  # its attempt's lease (renewed in the background while it runs)
    cancel_requested_at: float | None = None  # loop time of the cancel intent (lag metric)
    observer: GenerationObserver | None = None  # its trace and latency figures
    _grace: asyncio.TimerHandle | None = field(default=None, repr=False)


def payload_hash(version_id: str, prompt_ids: tuple[int, ...], req: ValidatedRequest) -> str:
    """sha256 of the effective request: pinned version, exact prompt token ids, settings, tier."""
    p = req.params
    doc = {
        "version": version_id,
        "tokens": list(prompt_ids),
        "settings": [
            p.max_output_tokens,
            p.temperature,
            p.top_p,
            p.top_k,
            p.seed,
            list(p.stop),
            p.ignore_eos,
        ],
        "tier": req.tier,
    }
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()


class GenerationManager:
    def __init__(
        self,
        store: Store,
        aggregator: UsageAggregator,
        dispatcher: Dispatcher,
        settings: GatewaySettings = GatewaySettings(),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: FrontendMetrics | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.store = store
        self.aggregator = aggregator
        self.dispatcher = dispatcher
        self.settings = settings
        self.clock = clock
        self.metrics = metrics or FrontendMetrics()
        self.tracer = tracer or trace.NoOpTracer()
        self._live: dict[str, LiveGeneration] = {}
        self.leases = LeaseKeeper(
            store,
            settings.lease_s,
            clock,
            live=lambda: [g for g in self._live.values() if not g.log.closed],
            on_lost=lambda g: self.cancel_live(self._live[g.generation_id], LEASE_LOST),
        )

    # --- start / attach ---------------------------------------------------------------------

    async def start(
        self,
        tenant: Tenant,
        req: ValidatedRequest,
        version: ServedVersion,
        prompt_ids: tuple[int, ...],
        received: tuple[int, float] | None = None,
    ) -> LiveGeneration:
        """`received`: (time_ns, monotonic seconds) the request arrived, for its trace and latencies."""
        received_ns, received_s = received or (time.time_ns(), time.monotonic())
        self._forget_expired()
        new_id = uuid.uuid4().hex
        new = NewGeneration(
            generation_id=new_id,
            tenant_id=tenant.id,
            request_id=req.request_id or new_id,
            payload_sha256=payload_hash(version.version_id, prompt_ids, req),
            model_version_id=version.version_id,
            reserved_input_tokens=len(prompt_ids),
            reserved_output_tokens=req.params.max_output_tokens,
        )
        run = GenerationRun(
            generation_id=new_id,
            request_id=new.request_id,
            version=version,
            prompt_ids=prompt_ids,
            params=req.params,
            cache_salt=tenant.id,
            tenant_weight=tenant.weight,
            tier=req.tier,
        )
        ticket = run.ticket(tenant.id, self.dispatcher.pool.block_size.get(version.version_id, 16))
        try:  # the queue deadline is checked after the tenant's quotas, in the same transaction
            self.dispatcher.check_deadline(ticket)
            late = None
        except ApiError as e:
            late = e
        generation, lease = await asyncio.to_thread(self._record, new, late)
        if lease is None:  # the same request again: attach to what is retained
            live = self._live.get(generation.id)
            if live is None:
                raise ApiError(
                    grpc.StatusCode.OUT_OF_RANGE,
                    "CURSOR_EXPIRED",
                    f"generation {generation.id} exists ({generation.state}); its stream is no longer "
                    "retained: use GetGeneration",
                    {"generation_id": generation.id},
                )
            return live
        run.epoch = lease.epoch
        run.usage_every_tokens = self.settings.usage_every_tokens
        run.usage_every_s = self.settings.usage_every_s
        live = LiveGeneration(
            generation.id,
            tenant.id,
            EventLog(generation.id, self.settings.max_events, self.settings.max_bytes),
        )
        live.lease = lease
        live.observer = observe_generation(
            self.tracer,
            self.metrics,
            generation_id=generation.id,
            request_id=generation.request_id,
            tenant=tenant.id,
            version=version.version_id,
            prompt_tokens=len(prompt_ids),
            max_output_tokens=req.params.max_output_tokens,
            tier=run.tier,
            received_ns=received_ns,
            received_s=received_s,
        )
        self._live[generation.id] = live
        live.task = asyncio.create_task(
            self._run(live, run, ticket, lease), name=f"generation-{generation.id}"
        )
        return live

    def _record(self, new: NewGeneration, late: ApiError | None) -> tuple[Generation, Lease | None]:
        """One transaction: create-or-get, reserve, start the first attempt (None when it existed).

        A new generation predicted to wait past its tier's allowance (`late`) is refused after
        the quota checks, and nothing is recorded."""
        now = self.clock()
        try:
            with self.store.transaction() as s:
                outcome = create_or_get_generation(s, new, now=now)
                if not outcome.created:
                    return outcome.generation, None
                reserve(s, outcome.generation, now=now)
                if late is not None:
                    raise late
                lease = start_attempt(
                    s,
                    outcome.generation.id,
                    worker_id=self.settings.worker_id,
                    now=now,
                    lease_for=timedelta(seconds=self.settings.lease_s),
                )
                return outcome.generation, lease
        except RequestIdConflict as e:
            raise ApiError(
                grpc.StatusCode.ALREADY_EXISTS,
                "REQUEST_ID_CONFLICT",
                f"request_id {new.request_id!r} was used with a different request",
                {"generation_id": e.generation_id},
            ) from e
        except QuotaExceeded as e:
            # rate windows say when they reset; load quotas free as generations finish: retry soon
            retry = e.retry_after.total_seconds() if e.retry_after is not None else 1.0
            raise ApiError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "QUOTA_EXCEEDED",
                f"tenant quota {e.kind} exhausted ({e.in_use} in use of {e.limit}, {e.requested} requested)",
                {"quota": str(e.kind)},
                retry_after_s=retry,
                quota=(
                    f"tenant:{e.tenant_id}",
                    f"{e.kind}: limit {e.limit}, in use {e.in_use}, requested {e.requested}",
                ),
            ) from e

    # --- the run ----------------------------------------------------------------------------

    async def _run(self, live: LiveGeneration, run: GenerationRun, ticket: Ticket, lease: Lease) -> None:
        report_seq = 0
        settling: asyncio.Future[Lease] | None = None  # the run ended on its own: sealing it
        obs = live.observer
        assert obs is not None
        run.trace_headers = tuple(obs.dispatching().items())
        events = run.events(self.dispatcher, ticket)
        try:
            try:
                async for event in events:
                    kind = event.WhichOneof("event")
                    if kind == "delta":
                        if event.delta.token_ids:
                            obs.tokens(len(event.delta.token_ids))
                    elif kind == "started":
                        obs.worker_admitted(run.cached_input_tokens)
                    elif kind == "finished":
                        obs.settling()
                        settling = asyncio.ensure_future(
                            self._settle(run, lease, event.finished.reason, report_seq + 1)
                        )
                        lease = await asyncio.shield(settling)
                    elif kind == "usage" and not run.ended:  # cumulative, to billing too
                        report_seq += 1
                        self._report(run, report_seq)
                    # paused (pulling nothing from the worker) while a reader holds the log full;
                    # the closing usage and finished never wait
                    closing = run.ended
                    timeout = self.settings.slow_consumer_timeout_s
                    too_slow = not closing and not await live.log.wait_for_room(timeout)
                    live.log.append(event)  # generated already: one over the limits when too slow
                    if kind == "delta":
                        obs.delta_appended()
                    elif kind == "finished":
                        obs.finished(event.finished.reason, event.finished.usage)
                    if too_slow:
                        log.info("generation %s: slow consumer (%.1fs)", live.generation_id, timeout)
                        self.cancel_live(live, "SLOW_CONSUMER")
                        await asyncio.sleep(0)  # the cancellation lands here
            except asyncio.CancelledError:
                if settling is None:
                    await events.aclose()  # cancelled while paused: end the worker request now
                    await self._close_cancelled(live, run, lease, report_seq + 1)
                else:  # too late to cancel: its own `finished` follows once it is sealed
                    await settling
                    live.log.append(event)
                    obs.finished(event.finished.reason, event.finished.usage)
            except ApiError as e:  # refused before any event: the client gets the status
                live.error = e
                obs.refused(e.reason)
                self.metrics.rejections.labels(e.code.name, e.reason).inc()
                await asyncio.to_thread(self._end, lease, GenerationState.FAILED, e.reason)
        except Exception:  # never leave a reader waiting on a log that will not close
            log.exception("generation %s: run failed", live.generation_id)
        finally:
            obs.refused("RUN_FAILED")  # a no-op when it ended with `finished` or a refusal
            live.log.close()
            live.closed_at = asyncio.get_running_loop().time()

    async def _close_cancelled(
        self, live: LiveGeneration, run: GenerationRun, lease: Lease, seq: int
    ) -> None:
        reason = Reason.INTERRUPTED if live.cancel_reason == LEASE_LOST else Reason.CANCELED
        events = run.closing_events(reason)
        if live.observer is not None:
            live.observer.settling()
        await self._settle(run, lease, reason, seq, recorded=live.cancel_reason)
        for event in events:
            live.log.append(event)
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
        self, run: GenerationRun, lease: Lease, reason: pb.Finished.Reason, seq: int, recorded: str = ""
    ) -> Lease:
        """Final usage flushed and acknowledged, then the attempt sealed in its terminal state
        (`recorded`, e.g. SLOW_CONSUMER, is the reason stored when it says more than `reason`)."""
        self._report(run, seq)
        await self.aggregator.flush_final(run.generation_id, run.epoch)
        state = STATE_OF_REASON.get(reason, GenerationState.INTERRUPTED)
        await asyncio.to_thread(self._end, lease, state, recorded or Reason.Name(reason))
        return lease

    # --- background: leases ------------------------------------------------------------------

    def start_background(self) -> None:
        """Starts renewing live runs' leases and sweeping expired ones (frontend/leases.py)."""
        self.leases.start()

    def _end(self, lease: Lease, state: GenerationState, reason: str) -> None:
        now = self.clock()
        try:
            with self.store.transaction() as s:
                if state is GenerationState.INTERRUPTED:
                    interrupt_attempt(s, lease.generation_id, lease.epoch, reason=reason, now=now)
                else:
                    finish_attempt(s, lease, state=state, reason=reason, now=now)
        except ControlError as e:  # fenced out (a newer attempt or an expired lease): not ours to end
            log.warning(
                "generation %s epoch %d: terminal update rejected: %s", lease.generation_id, lease.epoch, e
            )

    async def shutdown(self) -> None:
        """Cancels every live run (each ends CANCELED, usage flushed) and waits for them."""
        self.leases.stop()
        tasks = [g.task for g in self._live.values() if g.task is not None and not g.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=30)

    # --- readers ----------------------------------------------------------------------------

    def retained(self, tenant_id: str, generation_id: str) -> LiveGeneration | None:
        self._forget_expired()
        live = self._live.get(generation_id)
        return live if live is not None and live.tenant_id == tenant_id else None

    def client_joined(self, live: LiveGeneration) -> None:
        live.clients += 1
        if live._grace is not None:
            live._grace.cancel()
            live._grace = None

    def client_left(self, live: LiveGeneration) -> None:
        """A client stream ended: cancel the run once none has come back within grace_s."""
        live.clients -= 1
        if live.clients > 0 or live.log.closed or live.task is None:
            return
        grace = self.settings.grace_s

        def expire() -> None:
            live._grace = None
            if live.clients == 0 and live.task is not None and not live.task.done():
                log.info("generation %s: no client for %.1fs, cancelling", live.generation_id, grace)
                self.cancel_live(live, DISCONNECTED)

        live._grace = asyncio.get_running_loop().call_later(grace, expire)

    def cancel_live(self, live: LiveGeneration, reason: str) -> None:
        """Stops a running generation from inside the gateway (e.g. reason SLOW_CONSUMER); it ends
        CANCELED with usage sealed and `reason` recorded. No-op once it has ended."""
        if live.task is not None and not live.task.done():
            live.cancel_reason = reason
            live.cancel_requested_at = asyncio.get_running_loop().time()
            live.task.cancel()

    def _forget_expired(self) -> None:
        now = asyncio.get_running_loop().time()
        for gid, live in list(self._live.items()):
            if live.closed_at is not None and now - live.closed_at > self.settings.retain_s:
                del self._live[gid]

    # --- cancel / get -----------------------------------------------------------------------

    async def cancel(self, tenant_id: str, generation_id: str) -> pb.Generation:
        intent = asyncio.get_running_loop().time()
        try:
            outcome = await asyncio.to_thread(self._request_cancel, tenant_id, generation_id)
        except GenerationNotFound as e:
            raise _not_found(generation_id) from e
        live = self._live.get(generation_id)
        if not outcome and live is not None and live.task is not None and not live.task.done():
            live.cancel_requested_at = intent
            live.task.cancel()
            await asyncio.wait({live.task}, timeout=30)
        return await self.get(tenant_id, generation_id=generation_id)

    def _request_cancel(self, tenant_id: str, generation_id: str) -> bool:
        """Persists the intent; True when the generation was already terminal."""
        with self.store.transaction() as s:
            return request_cancel(s, tenant_id, generation_id, now=self.clock()).already_terminal

    async def get(self, tenant_id: str, *, generation_id: str = "", request_id: str = "") -> pb.Generation:
        return await asyncio.to_thread(self._get, tenant_id, generation_id, request_id)

    def _get(self, tenant_id: str, generation_id: str, request_id: str) -> pb.Generation:
        with self.store.transaction() as s:
            if request_id:
                g = find_by_request_id(s, tenant_id, request_id)
                if g is None:
                    raise _not_found(request_id)
            else:
                try:
                    g = get_generation(s, tenant_id, generation_id)
                except GenerationNotFound as e:
                    raise _not_found(generation_id) from e
            billed = generation_usage(s, g.id)
            return pb.Generation(
                generation_id=g.id,
                request_id=g.request_id,
                state=pb.Generation.State.Value(str(g.state)),
                model_version=g.model_version_id,
                finish_reason=_reason(g.terminal_reason, GenerationState(g.state)),
                epoch=g.current_epoch or 0,
                usage=pb.TokenUsage(
                    input_tokens=billed.billed.input_tokens,
                    cached_input_tokens=billed.billed.cached_input_tokens,
                    output_tokens=billed.billed.output_tokens,
                ),
                usage_final=billed.final,
            )


def lease_id(lease: Lease) -> tuple[str, int]:
    return lease.generation_id, lease.epoch


def _reason(name: str | None, state: GenerationState) -> pb.Finished.Reason:
    """The API's finish reason of a recorded terminal reason (SLOW_CONSUMER is CANCELED, ...)."""
    value = pb.Finished.Reason.DESCRIPTOR.values_by_name.get(name or "")
    if value is not None:
        return Reason.Value(value.name)
    by_state = {
        GenerationState.CANCELED: Reason.CANCELED,
        GenerationState.INTERRUPTED: Reason.INTERRUPTED,
        GenerationState.FAILED: Reason.FAILED,
    }
    return by_state.get(state, Reason.REASON_UNSPECIFIED)


def _not_found(key: str) -> ApiError:
    return ApiError(grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND", f"no generation {key!r}")
