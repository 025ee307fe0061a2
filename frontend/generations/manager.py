"""Generations in the frontend, as use cases over the lifecycle layer: admit, cancel, get.

start()  -> create-or-get (tenant, request_id) with the effective-payload hash and reserve the
            tenant budget in one transaction (lifecycle/admission.py): it is QUEUED, owned by this
            frontend; its run (frontend/generations/run_loop.py) starts the attempt once a worker has room,
            and appends its events to an EventLog that any number of client streams follow
            (frontend/generations/live.py). Refused (DRAINING) once drain() began
cancel() -> persist the intent, then stop the run; the engine drops it at the next step
get()    -> the recorded state, tenant-scoped; while QUEUED, its place in this frontend's queue
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import grpc
from opentelemetry import trace
from opentelemetry.trace import Tracer

from billing.aggregator import UsageAggregator
from config.settings import FrontendSettings, StoreSettings
from control.generations import NewGeneration
from control.states import GenerationState
from datastore.retry import retrying
from datastore.store import Store
from frontend.api_errors import ApiError
from frontend.auth import Tenant
from frontend.catalog.registry import ServedVersion
from frontend.dispatch.dispatcher import Dispatcher
from frontend.generations.cache_salt import CacheSalts
from frontend.generations.leases import LeaseKeeper
from frontend.generations.live import LiveGeneration, LiveRegistry
from frontend.generations.message import generation_message
from frontend.generations.run import GenerationRun
from frontend.generations.run_loop import LEASE_LOST, RunLoop
from frontend.generations.stream_log import EventLog
from frontend.generations.telemetry import observe_generation
from frontend.generations.validation import ValidatedRequest
from frontend.metrics import FrontendMetrics
from frontend.refusals import Draining, Refusal, StoreUnavailable
from frontend.store_health import StoreProbe
from lifecycle.admission import admit
from lifecycle.cancel import request_cancel
from lifecycle.reads import get_generation, get_generation_by_request
from llm.v1 import generations_pb2 as pb

__all__ = ["GenerationManager", "LiveGeneration", "NotRetained", "payload_hash"]


class NotRetained(ApiError):
    """The request id names a generation whose stream this frontend does not retain (it ended long
    ago, or another frontend runs it): OUT_OF_RANGE CURSOR_EXPIRED unless its owner can be reached."""

    def __init__(self, generation_id: str, state: str) -> None:
        super().__init__(
            grpc.StatusCode.OUT_OF_RANGE,
            "CURSOR_EXPIRED",
            f"generation {generation_id} exists ({state}); its stream is no longer retained: "
            "use GetGeneration",
            {"generation_id": generation_id},
        )

    @property
    def generation_id(self) -> str:
        return self.metadata["generation_id"]


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
    if p.guide is not None or p.logprobs:  # only when set: a free request's hash is what it always was
        doc["output"] = [list(p.guide) if p.guide else None, p.logprobs, p.top_logprobs]
    return hashlib.sha256(json.dumps(doc, separators=(",", ":")).encode()).hexdigest()


class GenerationManager:
    def __init__(
        self,
        store: Store,
        aggregator: UsageAggregator,
        dispatcher: Dispatcher,
        settings: FrontendSettings | None = None,
        store_settings: StoreSettings | None = None,
        frontend_id: str = "",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: FrontendMetrics | None = None,
        tracer: Tracer | None = None,
        salts: CacheSalts | None = None,
    ) -> None:
        """settings, store_settings: the config's [frontend] and [store] sections. frontend_id: this
        frontend replica, recorded as the owner of what it admits. salts: the tenants' prefix-cache
        salts (a fresh secret when not given)."""
        settings = settings or FrontendSettings()
        store_settings = store_settings or StoreSettings()
        self.frontend_id = frontend_id
        self.salts = salts or CacheSalts.generate()
        self.store = store
        self.dispatcher = dispatcher
        self.settings = settings
        self.clock = clock
        self.metrics = metrics or FrontendMetrics()
        self.tracer = tracer or trace.NoOpTracer()
        self.live = LiveRegistry(
            settings.disconnect_grace_s, settings.stream_retain_s, settings.stream_retain_max_bytes
        )
        self.runs = RunLoop(
            store, aggregator, dispatcher, self.live, settings, store_settings, clock, self.metrics
        )
        self.leases = LeaseKeeper(
            store,
            settings.attempt_lease_s,
            clock,
            live=self.live.open,
            on_lost=lambda g: self.live.cancel(g, LEASE_LOST),  # type: ignore[arg-type]
            queue_bound_s=max(dispatcher.queue_wait_s.values()),
            on_cancel=lambda g: self.live.cancel(g, "CANCELED"),  # type: ignore[arg-type]
            before_sweep=aggregator.flush,
        )
        self.store_probe = StoreProbe(store, store_settings.probe_interval_s)
        self.draining = False  # drain() began: no new generation is admitted

    async def start(
        self,
        tenant: Tenant,
        req: ValidatedRequest,
        version: ServedVersion,
        prompt_ids: tuple[int, ...],
        received: tuple[int, float] | None = None,
    ) -> LiveGeneration:
        """Admits the request (QUEUED) and starts its run, or attaches to the generation its request
        id already names. `received`: (time_ns, monotonic s) it arrived, for its trace."""
        if self.draining:
            raise Draining()
        self.live.admitting += 1  # counted before the first await: a drain beginning meanwhile waits
        try:
            return await self._start(tenant, req, version, prompt_ids, received)
        finally:
            self.live.admitting -= 1

    async def _start(
        self,
        tenant: Tenant,
        req: ValidatedRequest,
        version: ServedVersion,
        prompt_ids: tuple[int, ...],
        received: tuple[int, float] | None,
    ) -> LiveGeneration:
        received_ns, received_s = received or (time.time_ns(), time.monotonic())
        if not self.store_probe.available:  # refused at once, not after the store's timeout
            raise StoreUnavailable()
        self.live.forget_expired()
        new_id = uuid.uuid4().hex
        new = NewGeneration(
            generation_id=new_id,
            tenant_id=tenant.id,
            request_id=req.request_id or new_id,
            payload_sha256=payload_hash(version.version_id, prompt_ids, req),
            model_version_id=version.version_id,
            reserved_input_tokens=len(prompt_ids),
            reserved_output_tokens=req.params.max_output_tokens,
            owner_frontend_id=self.frontend_id or None,
            api_key_id=tenant.key_id,
        )
        run = GenerationRun(
            generation_id=new_id,
            request_id=new.request_id,
            version=version,
            prompt_ids=prompt_ids,
            params=req.params,
            cache_salt=self.salts.for_tenant(tenant.id),
            tenant_weight=tenant.weight,
            tier=req.tier,
            epoch=0,  # no attempt yet
            usage_every_tokens=self.settings.usage_every_tokens,
            usage_every_s=self.settings.usage_every_s,
        )
        ticket = run.ticket(tenant.id, self.dispatcher.pool.block_size.get(version.version_id, 16))
        try:  # the queue deadline is checked after the tenant's quotas, in the same transaction
            self.dispatcher.check_deadline(ticket)
            late = None
        except Refusal as e:
            late = e
        self.dispatcher.arriving(ticket)  # from its QUEUED record on, GetGeneration shows its place
        task: asyncio.Task[None] | None = None
        try:
            admission = await asyncio.to_thread(
                retrying, admit, self.store, new, now=self.clock(), refusal=late
            )
            # a retry after a broken connection finds its own first try committed: still ours
            if not admission.created and admission.generation_id != new_id:  # the same request again
                retained = self.live.get(admission.generation_id)
                if retained is None:
                    raise NotRetained(admission.generation_id, str(admission.state))
                return retained
            live = LiveGeneration(
                new_id,
                tenant.id,
                EventLog(new_id, self.settings.stream_max_events, self.settings.stream_max_bytes),
            )
            live.observer = observe_generation(
                self.tracer,
                self.metrics,
                generation_id=new_id,
                request_id=new.request_id,
                tenant=tenant.id,
                version=version.version_id,
                prompt_tokens=len(prompt_ids),
                max_output_tokens=req.params.max_output_tokens,
                tier=run.tier,
                received_ns=received_ns,
                received_s=received_s,
            )
            self.live.add(live)
            live.task = task = asyncio.create_task(
                self.runs.run(live, run, ticket), name=f"generation-{new_id}"
            )
            return live
        finally:
            if task is None:
                self.dispatcher.arrived(new_id)
            else:
                task.add_done_callback(lambda _: self.dispatcher.arrived(new_id))

    def start_background(self) -> None:
        """Starts renewing live runs' leases and sweeping expired ones (frontend/generations/leases.py), and
        probing the store (frontend/store_health.py)."""
        self.leases.start()
        self.store_probe.start()

    async def drain(self, timeout_s: float) -> bool:
        """Admits nothing more and waits, up to `timeout_s`, until every run has ended and no client
        follows one (its readers took every event); True when that happened in time."""
        self.draining = True
        return await self.live.wait_idle(timeout_s)

    async def shutdown(self) -> None:
        """Cancels every live run (each ends CANCELED, usage flushed) and waits for them."""
        self.leases.stop()
        await self.store_probe.close()
        await self.live.shutdown()

    # --- what the servicers follow ------------------------------------------------------------

    def retained(self, tenant_id: str, generation_id: str) -> LiveGeneration | None:
        return self.live.retained(tenant_id, generation_id)

    def client_joined(self, live: LiveGeneration) -> None:
        self.live.client_joined(live)

    def client_left(self, live: LiveGeneration) -> None:
        self.live.client_left(live)

    # --- cancel / get -----------------------------------------------------------------------

    async def cancel(self, tenant_id: str, generation_id: str) -> pb.Generation:
        intent = asyncio.get_running_loop().time()
        outcome = await asyncio.to_thread(
            request_cancel, self.store, tenant_id, generation_id, now=self.clock()
        )
        live = self.live.get(generation_id)
        if not outcome.already_terminal and live is not None and live.running:
            assert live.task is not None
            self.live.cancel(live, "CANCELED", intent_at=intent)  # once: a second waits for the first
            await asyncio.wait({live.task}, timeout=30)
        return await self.get(tenant_id, generation_id=generation_id)

    async def get(self, tenant_id: str, *, generation_id: str = "", request_id: str = "") -> pb.Generation:
        if request_id:
            record = await asyncio.to_thread(get_generation_by_request, self.store, tenant_id, request_id)
        else:
            record = await asyncio.to_thread(get_generation, self.store, tenant_id, generation_id)
        message = generation_message(record)
        queued = self.dispatcher.queued(record.generation_id)
        if record.state is GenerationState.QUEUED and queued is not None:
            message.queue_position, wait_s = queued[0], queued[1]
            message.predicted_wait_ms = int(wait_s * 1000)
        return message
