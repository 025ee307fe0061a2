"""The Admin service: model rollout and worker management, for admin keys only (frontend/auth.py).

RegisterModelVersion  verifies an artifact (the manifest's sha256 as given, then every file's
                      checksum), loads it on the workers and records it READY; idempotent
SetAliasRoute         points an alias at versions with canary weights; generations already
                      admitted keep the version they were pinned to
DrainWorker           the worker takes no new generations (its active ones finish) until
UndrainWorker         routes to it again
ListWorkers           the worker pool as this frontend sees it
PushModelVersion      an artifact uploaded, verified and moved into the repository, then loaded
FetchArtifactFile     a repository file from an offset (frontend/admin/artifact_calls.py)
PromoteVersion        alias -> one version at 100%
RollbackAlias         alias -> its route before its last change
RetireVersion         DRAINING (no new pins), then unloaded and RETIRED (frontend/admin/rollout.py)
ListModelChanges      the record of catalog changes: who, when, what

Every change commits to the control store first (it survives restarts and reaches the other
frontends through the catalog revision), then updates this frontend's caches.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc

from artifacts.manifest import ArtifactIntegrityError
from control.rollout import Change
from frontend.admin.artifact_calls import ArtifactCalls
from frontend.admin.push import Repository
from frontend.admin.rollout import Rollout
from frontend.auth import current_admin
from frontend.catalog.cache import CatalogCache
from frontend.catalog.messages import route_message, version_message
from frontend.catalog.registry import ModelRegistry, ServedVersion, load_version
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool, ready_workers
from frontend.refusals import InvalidRequest, NotFound, PreconditionFailed
from llm.v1 import admin_pb2, admin_pb2_grpc, models_pb2

Deploy = Callable[[ServedVersion], Awaitable[None]]  # loads a verified version on the workers


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(
        self,
        registry: ModelRegistry,
        pool: WorkerPool,
        catalog: CatalogCache,
        deploy: Deploy,
        rollout: Rollout,
        repository: Repository,
        pump: Callable[[], None] = lambda: None,
    ) -> None:
        """catalog: writes to the store, then to the caches. pump: wakes generations waiting for
        worker room (an undrained worker has some)."""
        self.registry = registry
        self.pool = pool
        self.catalog = catalog
        self.deploy = deploy
        self.rollout = rollout
        self.pump = pump
        self._deploying = asyncio.Lock()
        self.artifacts = ArtifactCalls(repository, registry, pool, rollout, self._deploy_once)

    async def _deploy_once(self, version: ServedVersion) -> None:
        async with self._deploying:
            if version.version_id not in self.registry.versions:
                await self.deploy(version)

    async def RegisterModelVersion(
        self, request: admin_pb2.RegisterModelVersionRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.ModelVersion:
        version = await asyncio.to_thread(verified_artifact, request)
        await self._deploy_once(version)
        return version_message(version, await ready_workers(self.pool, version))

    async def SetAliasRoute(
        self, request: admin_pb2.SetAliasRouteRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.AliasRoute:
        route = request.route
        weights: dict[str, float] = {}
        for t in route.targets:
            weights[t.version_id] = weights.get(t.version_id, 0.0) + t.weight
        await asyncio.to_thread(self.rollout.set_route, route.alias, weights, current_admin())
        return route_message(route.alias, self.registry.routes[route.alias])

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

    async def PromoteVersion(
        self, request: admin_pb2.PromoteVersionRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.AliasRoute:
        route = await asyncio.to_thread(
            self.rollout.promote, request.alias, request.version_id, current_admin()
        )
        return route_message(request.alias, route)

    async def RollbackAlias(
        self, request: admin_pb2.RollbackAliasRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.AliasRoute:
        route = await asyncio.to_thread(self.rollout.rollback, request.alias, current_admin())
        return route_message(request.alias, route)

    async def RetireVersion(
        self, request: admin_pb2.RetireVersionRequest, context: grpc.aio.ServicerContext
    ) -> models_pb2.ModelVersion:
        status = await self.rollout.retire(request.version_id, request.delete_files, current_admin())
        version = self.registry.versions.get(request.version_id)
        if version is None:  # known to the store, not loaded here
            return models_pb2.ModelVersion(id=request.version_id, status=str(status))
        return version_message(version, await ready_workers(self.pool, version), str(status))

    async def ListModelChanges(
        self, request: admin_pb2.ListModelChangesRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListModelChangesResponse:
        changes = await asyncio.to_thread(self.rollout.changes, min(request.limit or 100, 1000))
        return admin_pb2.ListModelChangesResponse(changes=[change_message(c) for c in changes])

    async def DrainWorker(
        self, request: admin_pb2.DrainWorkerRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.Worker:
        return await self._set_draining(request.worker_id, True)

    async def UndrainWorker(
        self, request: admin_pb2.UndrainWorkerRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.Worker:
        return await self._set_draining(request.worker_id, False)

    async def _set_draining(self, worker_id: str, draining: bool) -> admin_pb2.Worker:
        if not await asyncio.to_thread(self.catalog.set_draining, worker_id, draining):
            raise NotFound("WORKER_NOT_FOUND", f"no worker {worker_id[:128]!r}")
        worker = self.pool.workers[worker_id]
        if not draining:
            self.pump()
        return worker_message(worker)

    async def ListWorkers(
        self, request: admin_pb2.ListWorkersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListWorkersResponse:
        workers = sorted(self.pool.workers.values(), key=lambda w: w.worker_id)
        return admin_pb2.ListWorkersResponse(workers=[worker_message(w) for w in workers])


def change_message(c: Change) -> admin_pb2.ModelChange:
    return admin_pb2.ModelChange(
        at_unix_ms=int(c.at.timestamp() * 1000),
        actor=c.actor,
        action=c.action,
        alias=c.alias or "",
        version_id=c.version_id or "",
        before=route_message(c.alias or "", c.before) if c.before is not None else None,
        after=route_message(c.alias or "", c.after) if c.after is not None else None,
    )


def worker_message(w: WorkerHandle) -> admin_pb2.Worker:
    return admin_pb2.Worker(
        worker_id=w.worker_id,
        address=w.address,
        loaded_versions=sorted(w.capacity),
        healthy=w.healthy,
        draining=w.draining,
        free_kv_blocks=max(0, sum(w.free_blocks(v) for v in w.capacity)),
        last_heartbeat_unix_ms=int(w.last_heartbeat * 1000),
    )


def verified_artifact(request: admin_pb2.RegisterModelVersionRequest) -> ServedVersion:
    """The artifact named by the request, checked against the given manifest checksum and its own
    file checksums (blocking: hashes the weights)."""
    uri = request.artifact_uri.removeprefix("file://")
    if not uri or not Path(uri).is_absolute():
        raise InvalidRequest("INVALID_ARTIFACT_URI", "artifact_uri must be an absolute path (or file:// URI)")
    if len(request.manifest_sha256) != 64:
        raise InvalidRequest("INVALID_CHECKSUM", "manifest_sha256 must be 64 hex digits")
    path = Path(uri)
    try:
        manifest = (path / "manifest.json").read_bytes()
    except OSError as e:
        raise PreconditionFailed("ARTIFACT_NOT_FOUND", f"no artifact manifest at {path}") from e
    if hashlib.sha256(manifest).hexdigest() != request.manifest_sha256.lower():
        raise PreconditionFailed(
            "CHECKSUM_MISMATCH", "the artifact's manifest does not match manifest_sha256"
        )
    try:
        version = load_version(path)
    except (ArtifactIntegrityError, OSError, KeyError, ValueError) as e:
        raise PreconditionFailed("ARTIFACT_INVALID", f"the artifact failed verification: {e}") from e
    if version.manifest.name != request.name:
        raise InvalidRequest(
            "NAME_MISMATCH", f"the artifact is model {version.manifest.name!r}, not {request.name[:128]!r}"
        )
    return version
