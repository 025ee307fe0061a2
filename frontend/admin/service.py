"""The Admin service, for admin keys only (frontend/auth.py): it adapts each rpc to Admin's calls
(frontend/admin/calls.py, shared with the HTTP app), passing who makes it; the streaming ones are
its own: PushModelVersion and FetchArtifactFile (frontend/admin/artifact_calls.py), and
ExportUsage (every tenant's sealed usage, frontend/accounts/admin_calls.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from frontend.accounts.admin_calls import TenancyCalls
from frontend.accounts.messages import usage_row_message
from frontend.admin.artifact_calls import ArtifactCalls
from frontend.admin.calls import AdminCalls, Deploy
from frontend.admin.push import Repository
from frontend.admin.rollout import Rollout
from frontend.auth import current_admin
from frontend.catalog.cache import CatalogCache
from frontend.catalog.registry import ModelRegistry, ServedVersion
from frontend.dispatch.worker_pool import WorkerPool
from llm.v1 import admin_pb2, admin_pb2_grpc, usage_pb2

__all__ = ["AdminService", "Deploy", "admin_service"]


def admin_service(
    registry: ModelRegistry,
    pool: WorkerPool,
    catalog: CatalogCache,
    deploy: Deploy,
    rollout: Rollout,
    repository: Repository,
    tenancy: TenancyCalls,
    pump: Callable[[], None] = lambda: None,
) -> AdminService:
    """The Admin servicer over its calls (a deploy runs once per version at a time)."""
    deploying = asyncio.Lock()

    async def deploy_once(version: ServedVersion) -> None:
        async with deploying:
            if version.version_id not in registry.versions:
                await deploy(version)

    calls = AdminCalls(registry, pool, catalog, rollout, tenancy, deploy_once, pump)
    return AdminService(calls, ArtifactCalls(repository, registry, pool, rollout, deploy_once))


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(self, calls: AdminCalls, artifacts: ArtifactCalls) -> None:
        self.calls = calls
        self.artifacts = artifacts

    async def _unary(self, name: str, request: Any) -> Any:
        return await self.calls.call(name, request, current_admin())

    async def PushModelVersion(
        self,
        request_iterator: AsyncIterator[admin_pb2.PushModelVersionRequest],
        context: grpc.aio.ServicerContext,
    ) -> admin_pb2.PushModelVersionResponse:
        return await self.artifacts.push(request_iterator)

    async def FetchArtifactFile(
        self, request: admin_pb2.FetchArtifactFileRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[admin_pb2.ArtifactChunk]:
        async for chunk in self.artifacts.fetch(request):
            yield chunk

    async def ExportUsage(
        self, request: usage_pb2.ExportUsageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[usage_pb2.UsageRow]:
        for row in await self.calls.tenancy.export_rows(request):
            yield usage_row_message(row)

    # --- the unary rpcs: each is Admin's call of the same name ----------------------------------

    async def RegisterModelVersion(self, request: Any, context: Any) -> Any:
        return await self._unary("RegisterModelVersion", request)

    async def SetAliasRoute(self, request: Any, context: Any) -> Any:
        return await self._unary("SetAliasRoute", request)

    async def PromoteVersion(self, request: Any, context: Any) -> Any:
        return await self._unary("PromoteVersion", request)

    async def RollbackAlias(self, request: Any, context: Any) -> Any:
        return await self._unary("RollbackAlias", request)

    async def RetireVersion(self, request: Any, context: Any) -> Any:
        return await self._unary("RetireVersion", request)

    async def ListModelChanges(self, request: Any, context: Any) -> Any:
        return await self._unary("ListModelChanges", request)

    async def DrainWorker(self, request: Any, context: Any) -> Any:
        return await self._unary("DrainWorker", request)

    async def UndrainWorker(self, request: Any, context: Any) -> Any:
        return await self._unary("UndrainWorker", request)

    async def ListWorkers(self, request: Any, context: Any) -> Any:
        return await self._unary("ListWorkers", request)

    async def CreateTenant(self, request: Any, context: Any) -> Any:
        return await self._unary("CreateTenant", request)

    async def UpdateTenant(self, request: Any, context: Any) -> Any:
        return await self._unary("UpdateTenant", request)

    async def ListTenants(self, request: Any, context: Any) -> Any:
        return await self._unary("ListTenants", request)

    async def CreateApiKey(self, request: Any, context: Any) -> Any:
        return await self._unary("CreateApiKey", request)

    async def ListApiKeys(self, request: Any, context: Any) -> Any:
        return await self._unary("ListApiKeys", request)

    async def UpdateApiKey(self, request: Any, context: Any) -> Any:
        return await self._unary("UpdateApiKey", request)

    async def RevokeApiKey(self, request: Any, context: Any) -> Any:
        return await self._unary("RevokeApiKey", request)

    async def RotateApiKey(self, request: Any, context: Any) -> Any:
        return await self._unary("RotateApiKey", request)

    async def ListTenantChanges(self, request: Any, context: Any) -> Any:
        return await self._unary("ListTenantChanges", request)

    async def SetModelPrice(self, request: Any, context: Any) -> Any:
        return await self._unary("SetModelPrice", request)

    async def ListModelPrices(self, request: Any, context: Any) -> Any:
        return await self._unary("ListModelPrices", request)

    async def ListGenerations(self, request: Any, context: Any) -> Any:
        return await self._unary("ListGenerations", request)
