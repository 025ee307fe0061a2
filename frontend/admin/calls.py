"""Admin's unary calls, whatever the transport: the gRPC servicer (frontend/admin/service.py) and the
HTTP app's `POST /v1/admin/{Method}` (frontend/http/admin_routes.py) both run `call(name, request,
actor)`, where `name` is the rpc's name in admin.proto (plus ListModels, the Models service's answer
for an operator) and `actor` the admin making it ("<operator> (key <fingerprint>)").

RegisterModelVersion  verifies an artifact (the manifest's sha256 as given, then every file's
                      checksum), loads it on the workers and records it READY; idempotent
SetAliasRoute, PromoteVersion, RollbackAlias, RetireVersion, ListModelChanges   roll-out
DrainWorker, UndrainWorker, ListWorkers   the worker pool
Tenants, keys, prices, usage, generations by state   frontend/accounts/admin_calls.py

Every change commits to the control store first (it survives restarts and reaches the other
frontends through the catalog revision), then updates this frontend's caches.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from artifacts.manifest import ArtifactIntegrityError
from control.rollout import Change
from frontend.accounts.admin_calls import TenancyCalls
from frontend.admin.rollout import Rollout
from frontend.catalog.cache import CatalogCache
from frontend.catalog.messages import list_models, route_message, version_message
from frontend.catalog.registry import ModelRegistry, ServedVersion, load_version
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool, ready_workers
from frontend.refusals import InvalidRequest, NotFound, PreconditionFailed
from llm.v1 import admin_pb2, models_pb2

Deploy = Callable[[ServedVersion], Awaitable[None]]  # loads a verified version on the workers
Handler = Callable[[Any, str], Awaitable[Message]]


class AdminCalls:
    def __init__(
        self,
        registry: ModelRegistry,
        pool: WorkerPool,
        catalog: CatalogCache,
        rollout: Rollout,
        tenancy: TenancyCalls,
        deploy_once: Deploy,
        pump: Callable[[], None] = lambda: None,
    ) -> None:
        """deploy_once: loads a verified version on the workers unless loaded (under a lock). pump:
        wakes generations waiting for worker room (an undrained worker has some)."""
        self.registry = registry
        self.pool = pool
        self.catalog = catalog
        self.rollout = rollout
        self.tenancy = tenancy
        self.deploy_once = deploy_once
        self.pump = pump
        t = tenancy
        # rpc name -> (its request message, what runs it)
        self.unary: dict[str, tuple[type[Message], Handler]] = {
            "RegisterModelVersion": (admin_pb2.RegisterModelVersionRequest, self.register),
            "SetAliasRoute": (admin_pb2.SetAliasRouteRequest, self.set_route),
            "PromoteVersion": (admin_pb2.PromoteVersionRequest, self.promote),
            "RollbackAlias": (admin_pb2.RollbackAliasRequest, self.rollback),
            "RetireVersion": (admin_pb2.RetireVersionRequest, self.retire),
            "ListModelChanges": (admin_pb2.ListModelChangesRequest, self.model_changes),
            "DrainWorker": (admin_pb2.DrainWorkerRequest, self.drain),
            "UndrainWorker": (admin_pb2.UndrainWorkerRequest, self.undrain),
            "ListWorkers": (admin_pb2.ListWorkersRequest, self.workers),
            "ListModels": (models_pb2.ListModelsRequest, self.models),
            "CreateTenant": (admin_pb2.CreateTenantRequest, t.create_tenant),
            "UpdateTenant": (admin_pb2.UpdateTenantRequest, t.update_tenant),
            "ListTenants": (admin_pb2.ListTenantsRequest, t.list_tenants),
            "CreateApiKey": (admin_pb2.CreateApiKeyRequest, t.create_key),
            "ListApiKeys": (admin_pb2.ListApiKeysRequest, t.list_keys),
            "UpdateApiKey": (admin_pb2.UpdateApiKeyRequest, t.update_key),
            "RevokeApiKey": (admin_pb2.RevokeApiKeyRequest, t.revoke_key),
            "RotateApiKey": (admin_pb2.RotateApiKeyRequest, t.rotate_key),
            "ListTenantChanges": (admin_pb2.ListTenantChangesRequest, t.list_changes),
            "SetModelPrice": (admin_pb2.SetModelPriceRequest, t.set_price),
            "ListModelPrices": (admin_pb2.ListModelPricesRequest, t.list_prices),
            "ListGenerations": (admin_pb2.ListGenerationsRequest, t.list_generations),
        }

    async def call(self, name: str, request: Message, actor: str) -> Message:
        return await self.unary[name][1](request, actor)

    # --- model versions and routes -----------------------------------------------------------

    async def register(
        self, request: admin_pb2.RegisterModelVersionRequest, actor: str
    ) -> models_pb2.ModelVersion:
        version = await asyncio.to_thread(verified_artifact, request)
        await self.deploy_once(version)
        return version_message(version, await ready_workers(self.pool, version))

    async def set_route(self, request: admin_pb2.SetAliasRouteRequest, actor: str) -> models_pb2.AliasRoute:
        route = request.route
        weights: dict[str, float] = {}
        for t in route.targets:
            weights[t.version_id] = weights.get(t.version_id, 0.0) + t.weight
        await asyncio.to_thread(self.rollout.set_route, route.alias, weights, actor)
        return route_message(route.alias, self.registry.routes[route.alias])

    async def promote(self, request: admin_pb2.PromoteVersionRequest, actor: str) -> models_pb2.AliasRoute:
        route = await asyncio.to_thread(self.rollout.promote, request.alias, request.version_id, actor)
        return route_message(request.alias, route)

    async def rollback(self, request: admin_pb2.RollbackAliasRequest, actor: str) -> models_pb2.AliasRoute:
        route = await asyncio.to_thread(self.rollout.rollback, request.alias, actor)
        return route_message(request.alias, route)

    async def retire(self, request: admin_pb2.RetireVersionRequest, actor: str) -> models_pb2.ModelVersion:
        status = await self.rollout.retire(request.version_id, request.delete_files, actor)
        version = self.registry.versions.get(request.version_id)
        if version is None:  # known to the store, not loaded here
            return models_pb2.ModelVersion(id=request.version_id, status=str(status))
        return version_message(version, await ready_workers(self.pool, version), str(status))

    async def model_changes(
        self, request: admin_pb2.ListModelChangesRequest, actor: str
    ) -> admin_pb2.ListModelChangesResponse:
        changes = await asyncio.to_thread(self.rollout.changes, min(request.limit or 100, 1000))
        return admin_pb2.ListModelChangesResponse(changes=[change_message(c) for c in changes])

    async def models(
        self, request: models_pb2.ListModelsRequest, actor: str
    ) -> models_pb2.ListModelsResponse:
        return await list_models(self.registry, self.pool)

    # --- workers ----------------------------------------------------------------------------

    async def drain(self, request: admin_pb2.DrainWorkerRequest, actor: str) -> admin_pb2.Worker:
        return await self._set_draining(request.worker_id, True)

    async def undrain(self, request: admin_pb2.UndrainWorkerRequest, actor: str) -> admin_pb2.Worker:
        return await self._set_draining(request.worker_id, False)

    async def _set_draining(self, worker_id: str, draining: bool) -> admin_pb2.Worker:
        if not await asyncio.to_thread(self.catalog.set_draining, worker_id, draining):
            raise NotFound("WORKER_NOT_FOUND", f"no worker {worker_id[:128]!r}")
        worker = self.pool.workers[worker_id]
        if not draining:
            self.pump()
        return worker_message(worker)

    async def workers(
        self, request: admin_pb2.ListWorkersRequest, actor: str
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
