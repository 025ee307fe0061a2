"""gRPC servicers: adapt protobuf to domain calls and ApiError to statuses, nothing more."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

import grpc

from frontend.auth import current_tenant
from frontend.errors import ApiError, invalid_argument
from frontend.generation import GenerationRun
from frontend.registry import ModelRegistry, ServedVersion
from frontend.tokenization import TemplateError
from frontend.validation import ValidatedRequest, check_context, check_for_version, validate
from frontend.worker import TritonWorker
from llm.v1 import generations_pb2, generations_pb2_grpc, models_pb2, models_pb2_grpc

log = logging.getLogger(__name__)


async def _unimplemented(context: grpc.aio.ServicerContext, rpc: str) -> None:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{rpc} is not implemented yet")


def tokenize(version: ServedVersion, req: ValidatedRequest) -> tuple[int, ...]:
    tok = version.tokenizer
    check_for_version(req.params, tok.vocab_size)
    try:
        ids = tok.encode(req.prompt) if req.prompt is not None else tok.encode_chat(req.messages or ())
    except TemplateError as e:
        raise invalid_argument("TEMPLATE_ERROR", str(e)) from e
    check_context(len(ids), req.params.max_output_tokens, version.context_length)
    return tuple(ids)


class GenerationsService(generations_pb2_grpc.GenerationsServicer):
    def __init__(self, registry: ModelRegistry, worker: TritonWorker) -> None:
        self.registry = registry
        self.worker = worker

    async def Generate(
        self, request: generations_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        tenant = current_tenant()
        try:
            req = validate(request)
            version = self.registry.resolve(req.model)
            prompt_ids = tokenize(version, req)
        except ApiError as e:
            await context.abort_with_status(e.to_status())
            return
        run = GenerationRun(
            generation_id=uuid.uuid4().hex,
            request_id=req.request_id or uuid.uuid4().hex,
            version=version,
            prompt_ids=prompt_ids,
            params=req.params,
            cache_salt=tenant.id,
            tenant_weight=tenant.weight,
            tier=0 if req.tier == generations_pb2.INTERACTIVE else 1,
        )
        log.info(
            "generation %s tenant=%s model=%s prompt_tokens=%d max_output=%d",
            run.generation_id,
            tenant.id,
            version.version_id,
            len(prompt_ids),
            req.params.max_output_tokens,
        )
        try:
            async for event in run.events(self.worker):
                yield event
        except ApiError as e:  # raised before the first event: the stream carries only the status
            log.info("generation %s refused: %s", run.generation_id, e.reason)
            await context.abort_with_status(e.to_status())
            return
        log.info("generation %s finished output_tokens=%d", run.generation_id, len(run.output_ids))

    async def Converse(self, request_iterator, context):
        await _unimplemented(context, "Converse")
        yield  # pragma: no cover - makes this an async generator

    async def Resume(self, request, context):
        await _unimplemented(context, "Resume")
        yield  # pragma: no cover

    async def GetGeneration(self, request, context):
        await _unimplemented(context, "GetGeneration")

    async def CancelGeneration(self, request, context):
        await _unimplemented(context, "CancelGeneration")


class ModelsService(models_pb2_grpc.ModelsServicer):
    def __init__(self, registry: ModelRegistry, worker: TritonWorker) -> None:
        self.registry = registry
        self.worker = worker

    async def ListModels(
        self, request: models_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.ListModelsResponse:
        current_tenant()  # authenticated by the interceptor
        versions = []
        for version in self.registry.versions.values():
            ready = await self.worker.is_model_ready(version.triton_model_name)
            m = version.manifest
            versions.append(
                models_pb2.ModelVersion(
                    name=m.name,
                    version=m.version,
                    id=m.version_id,
                    context_length=m.context_length,
                    compatibility_key=m.compatibility_key,
                    ready=ready,
                    ready_workers=1 if ready else 0,
                    weights_sha256=m.files["model.safetensors"],
                    tokenizer_sha256=m.files["tokenizer.json"],
                    template_sha256=m.files["chat_template.jinja"],
                )
            )
        aliases = [
            models_pb2.AliasRoute(alias=a, targets=[models_pb2.WeightedVersion(version_id=v, weight=100)])
            for a, v in sorted(self.registry.aliases.items())
        ]
        return models_pb2.ListModelsResponse(versions=versions, aliases=aliases)
