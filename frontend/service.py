"""gRPC servicers: adapt protobuf to domain calls and ApiError to statuses, nothing more."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import grpc

from frontend.auth import Tenant, current_tenant
from frontend.converse import Conversation
from frontend.error_map import api_error
from frontend.errors import ApiError, cursor_expired, invalid_argument
from frontend.generations import GenerationManager, LiveGeneration
from frontend.offload import Offload
from frontend.registry import ModelRegistry, ServedVersion
from frontend.run_loop import rejected
from frontend.stream_log import Cursor, CursorExpired
from frontend.validation import (
    DEFAULT_LIMITS,
    RequestLimits,
    ValidatedRequest,
    check_context,
    check_for_version,
    validate,
)
from frontend.worker_pool import WorkerPool, ready_workers
from lifecycle.reads import TenantUsage
from llm.v1 import (
    generations_pb2,
    generations_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)

log = logging.getLogger(__name__)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def tokenize(version: ServedVersion, req: ValidatedRequest) -> tuple[int, ...]:
    tok = version.tokenizer
    check_for_version(req.params, tok.vocab_size)
    ids = tok.encode(req.prompt) if req.prompt is not None else tok.encode_chat(req.messages or ())
    check_context(len(ids), req.params.max_output_tokens, version.context_length)
    return tuple(ids)


class GenerationsService(generations_pb2_grpc.GenerationsServicer):
    def __init__(
        self,
        registry: ModelRegistry,
        manager: GenerationManager,
        converse_window: int = 256,
        limits: RequestLimits = DEFAULT_LIMITS,
        offload: Offload | None = None,
    ) -> None:
        self.registry = registry
        self.manager = manager
        self.converse_window = converse_window  # Converse: events per generation beyond the ack
        self.limits = limits
        self.offload = offload or Offload()  # tokenization and templates, off the event loop

    async def Generate(
        self, request: generations_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        live = await self.start(current_tenant(), request)
        async for event in self._follow(live, 0, context):
            yield event

    async def start(self, tenant: Tenant, request: generations_pb2.GenerateRequest) -> LiveGeneration:
        """Validates, resolves, tokenizes and admits a request (Generate, Converse's `start`);
        raises the ApiError of a refusal (frontend/error_map.py)."""
        received = (time.time_ns(), time.monotonic())
        try:
            req = validate(request, self.limits)
            key = f"{tenant.id}/{req.request_id}" if req.request_id else ""
            version = self.registry.resolve(req.model, key)
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

    async def Resume(
        self, request: generations_pb2.ResumeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        tenant = current_tenant()
        live = self.manager.retained(tenant.id, request.generation_id)
        if live is None:  # NOT_FOUND for another tenant's or an unknown id; else its stream expired
            await self.manager.get(tenant.id, generation_id=request.generation_id)
            raise cursor_expired(request.generation_id)
        async for event in self._follow(live, request.after_sequence, context):
            yield event

    async def _follow(
        self, live: LiveGeneration, after: int, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        """The generation's events after `after`; a client that goes away starts the grace period.

        The reader's cursor advances as grpc takes each event: grpc awaits a write's completion
        before asking for the next, so a client that stops reading stops the cursor once HTTP/2
        flow control blocks the write, and then the run is paused (and, too slow, cancelled)."""
        error: ApiError | None = None
        try:
            cursor = live.log.attach(after)
        except CursorExpired as e:
            raise cursor_expired(live.generation_id) from e
        # the RPC's end (completion, cancellation, disconnect) is seen by the context's callback,
        # not by this generator, which grpc may never resume once the client has gone
        self.manager.client_joined(live)
        span = live.observer.delivery("delivery", after) if live.observer is not None else None

        def left(_: object) -> None:
            self._left(live, cursor)
            if span is not None:
                span.set_attribute("llm.delivered_through", cursor.consumed)
                span.end()

        context.add_done_callback(left)
        try:
            async for event in live.log.follow(after, cursor):
                live.log.advance(cursor, event.sequence)
                yield event
        except CursorExpired:
            error = cursor_expired(live.generation_id)
        if error is None and live.error is not None and not live.finished:
            error = live.error  # refused, or its end could not be recorded: the stream ends with the status
        if error is not None:
            raise error

    def _left(self, live: LiveGeneration, cursor: Cursor) -> None:
        live.log.detach(cursor)
        self.manager.client_left(live)

    async def GetGeneration(
        self, request: generations_pb2.GetGenerationRequest, context: grpc.aio.ServicerContext
    ) -> generations_pb2.Generation:
        tenant = current_tenant()
        if request.WhichOneof("key") is None:
            raise invalid_argument("MISSING_KEY", "one of generation_id or request_id is required")
        return await self.manager.get(
            tenant.id, generation_id=request.generation_id, request_id=request.request_id
        )

    async def CancelGeneration(
        self, request: generations_pb2.CancelGenerationRequest, context: grpc.aio.ServicerContext
    ) -> generations_pb2.Generation:
        return await self.manager.cancel(current_tenant().id, request.generation_id)

    async def Converse(
        self,
        request_iterator: AsyncIterator[generations_pb2.ConverseRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        conversation = Conversation(current_tenant(), self.start, self.manager, self.converse_window)
        context.add_done_callback(lambda _: conversation.close())
        async for event in conversation.events(request_iterator):
            yield event


def version_message(version: ServedVersion, ready_workers: int) -> models_pb2.ModelVersion:
    m = version.manifest
    return models_pb2.ModelVersion(
        name=m.name,
        version=m.version,
        id=m.version_id,
        context_length=m.context_length,
        compatibility_key=m.compatibility_key,
        ready=ready_workers > 0,
        ready_workers=ready_workers,
        weights_sha256=m.files["model.safetensors"],
        tokenizer_sha256=m.files["tokenizer.json"],
        template_sha256=m.files["chat_template.jinja"],
        quantization=m.quantization,
    )


def route_message(alias: str, route: dict[str, float]) -> models_pb2.AliasRoute:
    targets = [models_pb2.WeightedVersion(version_id=v, weight=round(w)) for v, w in sorted(route.items())]
    return models_pb2.AliasRoute(alias=alias, targets=targets)


class ModelsService(models_pb2_grpc.ModelsServicer):
    def __init__(self, registry: ModelRegistry, pool: WorkerPool) -> None:
        self.registry = registry
        self.pool = pool

    async def ListModels(
        self, request: models_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.ListModelsResponse:
        current_tenant()  # authenticated by the interceptor
        versions = [
            version_message(version, await ready_workers(self.pool, version))
            for version in self.registry.versions.values()
        ]
        aliases = [route_message(a, r) for a, r in sorted(self.registry.routes.items())]
        return models_pb2.ListModelsResponse(versions=versions, aliases=aliases)


class UsageService(usage_pb2_grpc.UsageServicer):
    """Recorded (billed) usage of the caller's tenant in a time window."""

    def __init__(self, usage: Callable[[str, datetime, datetime], TenantUsage]) -> None:
        """usage: (tenant id, window start, window end) -> its recorded usage (blocking)."""
        self.usage = usage

    async def GetUsage(
        self, request: usage_pb2.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> usage_pb2.GetUsageResponse:
        tenant = current_tenant()
        if request.tenant and request.tenant != tenant.id:  # admin credentials come with Admin
            raise ApiError(
                grpc.StatusCode.PERMISSION_DENIED, "TENANT_MISMATCH", "a tenant may read only its own usage"
            )
        start = _time(request, "window_start") or EPOCH
        end = _time(request, "window_end") or datetime.now(UTC)
        if end <= start:
            raise invalid_argument("INVALID_WINDOW", "window_end must be after window_start")
        u = await asyncio.to_thread(self.usage, tenant.id, start, end)
        return usage_pb2.GetUsageResponse(
            tenant=tenant.id,
            input_tokens=u.recorded.input_tokens,
            cached_input_tokens=u.recorded.cached_input_tokens,
            output_tokens=u.recorded.output_tokens,
            interrupted_output_tokens=u.interrupted.output_tokens,
            unbilled_estimate_tokens=u.unbilled.input_tokens + u.unbilled.output_tokens,
            generations=u.generations,
        )


def _time(request: usage_pb2.GetUsageRequest, field: str) -> datetime | None:
    """The Timestamp field as a datetime (None when unset); INVALID_WINDOW when out of range."""
    if not request.HasField(field):
        return None
    try:
        return getattr(request, field).ToDatetime(UTC)
    except (ValueError, OverflowError, OSError) as e:
        raise invalid_argument("INVALID_WINDOW", f"{field} is not a valid timestamp") from e
