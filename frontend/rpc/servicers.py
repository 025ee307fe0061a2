"""gRPC servicers: adapt protobuf calls to the shared calls (frontend/calls.py) and ApiError to
statuses, nothing more."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from frontend.accounts.tenant_calls import AccountCalls
from frontend.auth import current_tenant
from frontend.calls import GenerationCalls, UsageCalls
from frontend.catalog.messages import list_models
from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.worker_pool import WorkerPool
from frontend.generations.reader import Follower
from frontend.rpc.converse import Conversation
from llm.v1 import (
    account_pb2,
    account_pb2_grpc,
    generations_pb2,
    generations_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)


class GenerationsService(generations_pb2_grpc.GenerationsServicer):
    def __init__(self, calls: GenerationCalls, converse_window: int = 256) -> None:
        self.calls = calls
        self.converse_window = converse_window  # Converse: events per generation beyond the ack

    async def Generate(
        self, request: generations_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        follower = await self.calls.open(current_tenant(), request)
        async for event in _follow(follower, context):
            yield event

    async def Resume(
        self, request: generations_pb2.ResumeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        reader = await self.calls.resume(current_tenant(), request)
        async for event in _follow(reader, context):
            yield event

    async def GetGeneration(
        self, request: generations_pb2.GetGenerationRequest, context: grpc.aio.ServicerContext
    ) -> generations_pb2.Generation:
        return await self.calls.get(current_tenant(), request)

    async def CancelGeneration(
        self, request: generations_pb2.CancelGenerationRequest, context: grpc.aio.ServicerContext
    ) -> generations_pb2.Generation:
        return await self.calls.cancel(current_tenant(), request)

    async def Converse(
        self,
        request_iterator: AsyncIterator[generations_pb2.ConverseRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[generations_pb2.GenerationEvent]:
        manager = self.calls.manager
        calls = self.calls
        conversation = Conversation(
            current_tenant(), calls.start, calls.cancel, manager, self.converse_window
        )
        context.add_done_callback(lambda _: conversation.close())
        async for event in conversation.events(request_iterator):
            yield event


async def _follow(
    reader: Follower, context: grpc.aio.ServicerContext
) -> AsyncIterator[generations_pb2.GenerationEvent]:
    """The reader's events; the RPC's end (completion, cancellation, disconnect) is seen by the
    context's callback, not by this generator, which grpc may never resume once the client has
    gone: the callback closes the reader (the disconnect grace period starts there)."""
    context.add_done_callback(lambda _: reader.close())
    async for event in reader.events():
        yield event


class ModelsService(models_pb2_grpc.ModelsServicer):
    def __init__(self, registry: ModelRegistry, pool: WorkerPool) -> None:
        self.registry = registry
        self.pool = pool

    async def ListModels(
        self, request: models_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.ListModelsResponse:
        tenant = current_tenant()  # authenticated by the interceptor
        return await list_models(self.registry, self.pool, tenant.allowed_models)


class UsageService(usage_pb2_grpc.UsageServicer):
    def __init__(self, calls: UsageCalls, accounts: AccountCalls) -> None:
        self.calls = calls
        self.accounts = accounts

    async def GetUsage(
        self, request: usage_pb2.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> usage_pb2.GetUsageResponse:
        return await self.calls.get(current_tenant(), request)

    async def ExportUsage(
        self, request: usage_pb2.ExportUsageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[usage_pb2.UsageRow]:
        for row in await self.accounts.export(current_tenant(), request):
            yield row


class AccountService(account_pb2_grpc.AccountServicer):
    def __init__(self, calls: AccountCalls) -> None:
        self.calls = calls

    async def GetAccount(
        self, request: account_pb2.GetAccountRequest, context: grpc.aio.ServicerContext
    ) -> account_pb2.AccountInfo:
        return await self.calls.get(current_tenant())

    async def ListKeys(
        self, request: account_pb2.ListKeysRequest, context: grpc.aio.ServicerContext
    ) -> account_pb2.ListKeysResponse:
        return await self.calls.list_keys(current_tenant())

    async def CreateKey(
        self, request: account_pb2.CreateKeyRequest, context: grpc.aio.ServicerContext
    ) -> account_pb2.CreatedKey:
        return await self.calls.create_key(current_tenant(), request)

    async def RevokeKey(
        self, request: account_pb2.RevokeKeyRequest, context: grpc.aio.ServicerContext
    ) -> account_pb2.ApiKey:
        return await self.calls.revoke_key(current_tenant(), request)
