"""The public API's calls, whatever the transport: the gRPC servicers (frontend/rpc/servicers.py,
converse.py) and the HTTP app (frontend/http/) adapt their wire formats to these, so every rule
(validation, admission, idempotency by request id, resume, cancel, reads of state and usage) exists
once. Requests and answers are the protobuf messages of protos/llm/v1: gRPC receives them as they
are, HTTP transcodes JSON into them (protobuf's JSON mapping) and back.

GenerationCalls  start (validate, resolve, tokenize, admit), open and resume (a Follower,
                 frontend/generations/reader.py), get, cancel. A generation another frontend runs is
                 followed and cancelled through its owner (frontend/fleet/relay_client.py Forwarding)
UsageCalls       the caller's billed usage (and spend) in a window
AccountCalls     the caller's account, keys and usage export (frontend/accounts/tenant_calls.py)
FrontendCalls    all of them for one frontend (`frontend_calls`), served by both its servers
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from config.settings import FrontendSettings
from control.errors import TenantDisabled
from frontend.accounts.tenant_calls import AccountCalls, Reload
from frontend.api_errors import api_error
from frontend.auth import Tenant
from frontend.catalog.registry import ModelRegistry, ServedVersion
from frontend.dispatch.worker_pool import WorkerPool
from frontend.fleet.relay_client import Forwarding, RelayStream
from frontend.generations.constraints import GuideChecker
from frontend.generations.manager import GenerationManager, LiveGeneration, NotRetained
from frontend.generations.offload import Offload
from frontend.generations.reader import Follower, Reader
from frontend.generations.run_loop import rejected
from frontend.generations.validation import (
    DEFAULT_LIMITS,
    RequestLimits,
    ValidatedRequest,
    check_context,
    check_for_version,
    validate,
)
from frontend.refusals import Draining, EventsExpired, InvalidRequest, NotPermitted
from lifecycle.reads import TenantUsage, usage_by_tenant
from llm.v1 import generations_pb2 as pb
from llm.v1 import usage_pb2

log = logging.getLogger(__name__)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def tokenize(version: ServedVersion, req: ValidatedRequest) -> tuple[int, ...]:
    tok = version.tokenizer
    check_for_version(req.params, tok.vocab_size)
    ids = tok.encode(req.prompt) if req.prompt is not None else tok.encode_chat(req.messages or ())
    check_context(len(ids), req.params.max_output_tokens, version.context_length)
    return tuple(ids)


class GenerationCalls:
    def __init__(
        self,
        registry: ModelRegistry,
        manager: GenerationManager,
        limits: RequestLimits = DEFAULT_LIMITS,
        offload: Offload | None = None,
        forwarding: Forwarding | None = None,
    ) -> None:
        """forwarding: how generations other frontends run are reached (None: this frontend alone)."""
        self.registry = registry
        self.manager = manager
        self.limits = limits
        self.offload = offload or Offload()  # tokenization and templates, off the event loop
        self.guides = GuideChecker(self.offload)  # structured outputs' constraints, compiled there too
        self.forwarding = forwarding

    async def start(self, tenant: Tenant, request: pb.GenerateRequest) -> LiveGeneration:
        """Validates, resolves, tokenizes and admits a request (Generate, Converse's `start`, HTTP);
        raises the ApiError of a refusal (frontend/api_errors.py)."""
        received = (time.time_ns(), time.monotonic())
        try:
            if tenant.disabled:  # from the cache; admission checks the store itself too
                raise TenantDisabled(tenant.id)
            req = validate(request, self.limits)
            if req.params.guide is not None:
                await self.guides.check(req.params.guide)
            key = f"{tenant.id}/{req.request_id}" if req.request_id else ""
            version = self.registry.resolve(req.model, key)
            if not self.registry.allows(tenant.allowed_models, req.model, version.version_id):
                raise NotPermitted(
                    "MODEL_NOT_ALLOWED",
                    f"model {req.model[:128]!r} is not open to this tenant",
                    {"model": req.model[:128]},
                )
            prompt_ids = await self.offload.run(tokenize, version, req)
            live = await self.manager.start(tenant, req, version, prompt_ids, received)
        except Exception as e:  # refused: counted, and raised as its API error
            error = api_error(e)
            rejected(self.manager.metrics, error)
            raise error from e
        log.info(
            "generation %s tenant=%s model=%s prompt_tokens=%d max_output=%d",
            live.generation_id,
            tenant.id,
            version.version_id,
            len(prompt_ids),
            req.params.max_output_tokens,
        )
        return live

    async def open(self, tenant: Tenant, request: pb.GenerateRequest, after: int = 0) -> Follower:
        """Generate: the stream of the generation the request starts, or of the one its request id
        already names (on whatever frontend runs it), after sequence `after`."""
        try:
            live = await self.start(tenant, request)
        except NotRetained as e:
            resume = pb.ResumeRequest(generation_id=e.generation_id, after_sequence=after)
            remote = await self.forward(tenant, resume)
            if remote is None:
                raise
            return remote
        return self.reader(live, after)

    def reader(self, live: LiveGeneration, after: int = 0) -> Reader:
        """A client stream of `live` after `after` (CURSOR_EXPIRED when no longer retained)."""
        return Reader(self.manager, live, after)

    async def retained(self, tenant: Tenant, generation_id: str) -> LiveGeneration:
        """The tenant's generation whose events are still retained here: NOT_FOUND for another
        tenant's or an unknown id, CURSOR_EXPIRED when its stream is not retained here."""
        live = self.manager.retained(tenant.id, generation_id)
        if live is None:
            await self.manager.get(tenant.id, generation_id=generation_id)
            raise EventsExpired(generation_id)
        return live

    async def resume(self, tenant: Tenant, request: pb.ResumeRequest) -> Follower:
        """The generation's events after the cursor, from this frontend or from its owner."""
        if self.manager.retained(tenant.id, request.generation_id) is None:
            remote = await self.forward(tenant, request)
            if remote is not None:
                return remote
        return await self.resume_here(tenant, request)

    async def forward(self, tenant: Tenant, request: pb.ResumeRequest) -> RelayStream | None:
        """The owner's stream of a generation another frontend runs (None: none does, or this
        frontend alone serves). A draining frontend relays no new stream (DRAINING: the client
        goes to another frontend), and its drain waits for the relays it has open."""
        if self.forwarding is None:
            return None
        if self.manager.draining:
            raise Draining()
        live = self.manager.live
        live.relays += 1  # counted before the first await, so a drain starting now waits for it
        try:
            remote = await self.forwarding.resume(tenant, request)
        except BaseException:
            live.relays -= 1
            raise
        if remote is None:
            live.relays -= 1
            return None

        def closed() -> None:
            live.relays -= 1

        remote.on_close = closed
        return remote

    async def resume_here(self, tenant: Tenant, request: pb.ResumeRequest) -> Reader:
        """Resume from what this frontend retains only (the relay's answer to other frontends)."""
        live = await self.retained(tenant, request.generation_id)
        return self.reader(live, request.after_sequence)

    def nothing_follows(self, tenant: Tenant, generation_id: str, after: int) -> bool:
        """The generation ended here and `after` is its last event (HTTP answers 204)."""
        live = self.manager.retained(tenant.id, generation_id)
        return live is not None and live.log.closed and live.finished and after >= live.log.last_sequence

    async def get(self, tenant: Tenant, request: pb.GetGenerationRequest) -> pb.Generation:
        if request.WhichOneof("key") is None:
            raise InvalidRequest("MISSING_KEY", "one of generation_id or request_id is required")
        return await self.manager.get(
            tenant.id, generation_id=request.generation_id, request_id=request.request_id
        )

    async def cancel(self, tenant: Tenant, request: pb.CancelGenerationRequest) -> pb.Generation:
        """CancelGeneration (and Converse's cancel frames): stopped here, or by its owner; with the
        owner gone, the intent is recorded and the answer is the recorded state."""
        if self.manager.live.get(request.generation_id) is None and self.forwarding is not None:
            answer = await self.forwarding.cancel(tenant, request)
            if answer is not None:
                return answer
        return await self.cancel_here(tenant, request)

    async def cancel_here(self, tenant: Tenant, request: pb.CancelGenerationRequest) -> pb.Generation:
        return await self.manager.cancel(tenant.id, request.generation_id)


# --- usage --------------------------------------------------------------------------------------


class UsageCalls:
    """Recorded (billed) usage of the caller's tenant in a time window."""

    def __init__(self, usage: Callable[[str, datetime, datetime], TenantUsage]) -> None:
        """usage: (tenant id, window start, window end) -> its recorded usage (blocking)."""
        self.usage = usage

    async def get(self, tenant: Tenant, request: usage_pb2.GetUsageRequest) -> usage_pb2.GetUsageResponse:
        if request.tenant and request.tenant != tenant.id:  # admin credentials come with Admin
            raise NotPermitted("TENANT_MISMATCH", "a tenant may read only its own usage")
        start = _time(request, "window_start") or EPOCH
        end = _time(request, "window_end") or datetime.now(UTC)
        if end <= start:
            raise InvalidRequest("INVALID_WINDOW", "window_end must be after window_start")
        u = await asyncio.to_thread(self.usage, tenant.id, start, end)
        return usage_pb2.GetUsageResponse(
            tenant=tenant.id,
            input_tokens=u.recorded.input_tokens,
            cached_input_tokens=u.recorded.cached_input_tokens,
            output_tokens=u.recorded.output_tokens,
            interrupted_output_tokens=u.interrupted.output_tokens,
            unbilled_estimate_tokens=u.unbilled.input_tokens + u.unbilled.output_tokens,
            generations=u.generations,
            spend_micros=u.spent_micros,
        )


def _time(request: usage_pb2.GetUsageRequest, field: str) -> datetime | None:
    """The Timestamp field as a datetime (None when unset); INVALID_WINDOW when out of range."""
    if not request.HasField(field):
        return None
    try:
        return getattr(request, field).ToDatetime(UTC)
    except (ValueError, OverflowError, OSError) as e:
        raise InvalidRequest("INVALID_WINDOW", f"{field} is not a valid timestamp") from e


# --- one frontend's calls ----------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class FrontendCalls:
    """The API's calls, shared by the gRPC and HTTP servers of one frontend."""

    registry: ModelRegistry
    pool: WorkerPool
    generations: GenerationCalls
    usage: UsageCalls
    converse_window: int
    accounts: AccountCalls


@asynccontextmanager
async def frontend_calls(
    registry: ModelRegistry,
    manager: GenerationManager,
    settings: FrontendSettings | None = None,
    forwarding: Forwarding | None = None,
    reload: Reload | None = None,
) -> AsyncIterator[FrontendCalls]:
    """The shared calls over `manager`, with their tokenizer threads (closed on exit). reload:
    reloads this frontend's catalog cache after a tenancy write (None: the next refresh does)."""
    settings = settings or FrontendSettings()
    limits = RequestLimits(settings.max_prompt_chars, settings.max_messages)
    offload = Offload(settings.tokenizer_threads, settings.max_pending_tokenizations)
    store = manager.store
    try:
        yield FrontendCalls(
            registry,
            manager.dispatcher.pool,
            GenerationCalls(registry, manager, limits, offload, forwarding),
            UsageCalls(lambda tenant, start, end: usage_by_tenant(store, tenant, start=start, end=end)),
            settings.converse_window_events,
            AccountCalls(store, reload or _later),
        )
    finally:
        offload.close()


async def _later() -> None:
    """No reload: the catalog's next refresh picks the write up."""
