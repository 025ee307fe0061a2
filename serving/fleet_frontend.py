"""`python -m serving frontend`: a stateless gateway of the fleet, with no workers of its own.

It serves the public API exactly as `make serve`'s frontend does (serving/frontend_node.py) over
a worker pool kept equal to the store's worker registry (frontend/fleet/worker_directory.py), with
canaries to the workers its streams run on (serving/stream_canaries.py), registers
itself in the store with a lease (frontend/fleet/membership.py), and serves the internal relay on
[fleet] relay_listen (frontend/fleet/relay.py), through which the other frontends forward Resume and
Cancel of the generations it runs; it forwards theirs to them (frontend/fleet/relay_client.py).

Model versions: a push or register here records the version and answers once a worker host has
loaded it; a retirement ends once none advertises it; this frontend adds the READY versions that
others pushed (serving/version_sync.py).

Everything that must hold across replicas lives in the store: generation identity and ownership,
attempts and leases (any frontend's sweeper interrupts a dead one's), tenant quotas (conditional
updates in the admission transaction, billing/ledger.py), the catalog. What stays in memory is a
cache with a refresh rule (catalog revision, worker registry) or this frontend's own live runs.

Secrets: [fleet] frontend_key (shared by the frontends: the relay's credential and the tenants'
prefix-cache salts, equal on every frontend so a tenant's cached prefixes serve it whichever
frontend it reaches) and [fleet] worker_key (Triton's access key, shared with the worker hosts).
SIGTERM: `drain()` admits nothing more (DRAINING, health NOT_SERVING), lets the streams finish
within [fleet] drain_timeout_s, and the frontend then leaves the registry and exits.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from opentelemetry.sdk.trace import SpanProcessor

from config.loader import check_loopback_only, require_fleet_keys
from config.settings import PlatformConfig
from control.model_versions import register_version
from control.models import ModelVersion, ModelVersionStatus
from datastore.locks import exclusive
from datastore.store import Store, open_store
from frontend.auth import ApiKeyStore
from frontend.catalog.cache import (
    CATALOG_WRITES,
    CatalogCache,
    read_catalog,
    seed_catalog,
    store_url,
    version_spec,
)
from frontend.catalog.registry import ModelRegistry, ServedVersion, load_version
from frontend.dispatch.worker_client import TritonWorker
from frontend.dispatch.worker_pool import WorkerPool
from frontend.fleet.membership import Membership
from frontend.fleet.relay import relay_server
from frontend.fleet.relay_client import Forwarding, RelayClient, relay_credential
from frontend.fleet.worker_directory import WorkerDirectory
from frontend.generations.cache_salt import CacheSalts
from frontend.generations.telemetry import tracer_provider
from frontend.refusals import Unavailable
from serving.artifact_fetch import repository_fetch
from serving.frontend_node import FrontendParts, RunningFrontend, make_dispatcher, serve_frontend
from serving.stream_canaries import StreamCanaries
from serving.triton import GRPC_ACCESS_HEADER
from serving.version_sync import ArtifactSource, FrontendVersions
from serving.worker_set import stored_versions
from serving.workers import artifact_for

log = logging.getLogger(__name__)


def fleet_salts(frontend_key: str) -> CacheSalts:
    """The tenants' prefix-cache salts, the same on every frontend holding the key."""
    return CacheSalts(hmac.new(frontend_key.encode(), b"llm prefix-cache salts", hashlib.sha256).digest())


class FleetFrontend:
    def __init__(self, cfg: PlatformConfig, span_processor: SpanProcessor | None = None) -> None:
        require_fleet_keys(cfg, "frontend_key", "worker_key")
        check_loopback_only(cfg)
        self.cfg = cfg
        self.frontend_id = f"frontend-{socket.gethostname()[:48]}-{secrets.token_hex(4)}"
        self.registry = ModelRegistry()
        self.pool = WorkerPool()
        self.keys = ApiKeyStore(admin_keys=cfg.frontend.admin_api_keys, fetch_keys=(cfg.fleet.worker_key,))
        self.salts = fleet_salts(cfg.fleet.frontend_key)
        self.tracer_provider = tracer_provider(cfg.telemetry, span_processor)
        self.store: Store | None = None
        self.catalog: CatalogCache | None = None
        self.membership: Membership | None = None  # while serve() runs
        self.running: RunningFrontend | None = None  # while serve() runs
        self.relay_port = 0  # while serve() runs

    def open(self) -> None:
        """Opens the store (migrating it), seeds it with the config and loads the versions it
        names or holds READY (their tokenizers and templates; blocking: verifies the artifacts)."""
        self.store = open_store(store_url(self.cfg.store.url), timeout_s=self.cfg.store.timeout_s)
        configured = [(m, load_version(artifact_for(m))) for m in self.cfg.models]
        now = datetime.now(UTC)
        seed_catalog(self.store, self.cfg.tenants, [(m.alias, v) for m, v in configured], now=now)
        versions = [v for _, v in configured]
        versions += stored_versions(self.store, {v.version_id for v in versions}, repository_fetch(self.cfg))
        for version in versions:
            self.registry.add_version(version)
        for model, version in configured:  # until a worker registers the version's pool
            self.pool.block_size[version.version_id] = model.block_size
        f = self.cfg.frontend
        self.catalog = CatalogCache(
            self.store, self.registry, self.keys, self.pool, f.catalog_refresh_s, f.max_tenant_kv_share
        )
        self.catalog.apply(read_catalog(self.store))

    def _connect(self, address: str) -> TritonWorker:
        return TritonWorker(
            address,
            inactivity_timeout_s=self.cfg.frontend.worker_inactivity_timeout_s,
            headers={GRPC_ACCESS_HEADER: self.cfg.fleet.worker_key},
        )

    @asynccontextmanager
    async def serve(
        self, listen: str | None = None, http_listen: str | None = None
    ) -> AsyncIterator[RunningFrontend]:
        """Serves until the block exits: gRPC on `listen` ([frontend] listen when None), HTTP on
        `http_listen` ([http] listen when None; "" for none), the relay on [fleet] relay_listen."""
        assert self.store is not None and self.catalog is not None, "open() first"
        cfg, fleet = self.cfg, self.cfg.fleet
        credential = relay_credential(fleet.frontend_key)
        relay = RelayClient(credential)
        directory = WorkerDirectory(self.store, self.pool, self._connect, fleet.registry_refresh_s)
        await directory.refresh()  # the registered workers, before the first request
        dispatcher = make_dispatcher(cfg, self.pool)
        directory.on_change = dispatcher.pump
        directory.start()
        versions = FrontendVersions(
            self.store, self.registry, ArtifactSource(repository_fetch(cfg)), cfg.frontend.catalog_refresh_s
        )
        versions.start()
        f = cfg.frontend
        canaries = StreamCanaries(
            self.pool,
            self.registry,
            self.frontend_id,
            f.worker_probe_interval_s,
            f.worker_inactivity_timeout_s,
        )
        canaries.start()
        parts = FrontendParts(
            cfg,
            self.store,
            self.registry,
            self.pool,
            self.keys,
            self.catalog,
            self.salts,
            self.tracer_provider,
            self.frontend_id,
            self.deploy_version,
            self.undeploy_version,
        )
        forwarding = Forwarding(self.store, self.frontend_id, relay)
        http_at = cfg.http.listen if http_listen is None else http_listen
        try:
            async with (
                serve_frontend(parts, dispatcher, listen or cfg.frontend.listen, http_at, forwarding) as node,
                relay_server(fleet.relay_listen, node.calls.generations, credential) as relay_port,
            ):
                host = fleet.relay_listen.rpartition(":")[0]
                advertised = fleet.relay_advertise or f"{host}:{relay_port}"
                self.membership = Membership(self.store, self.frontend_id, advertised, fleet.frontend_lease_s)
                await asyncio.to_thread(self.membership.join)
                self.membership.start()
                self.running, self.relay_port = node, relay_port
                try:
                    yield node
                finally:
                    self.running = None
                    await self.membership.leave()
        finally:
            await versions.close()
            await canaries.close()
            await directory.close()
            await relay.close()

    async def drain(self) -> bool:
        """Admits nothing more and lets the streams finish, within [fleet] drain_timeout_s; True
        when every run ended and every reader was served in time."""
        assert self.running is not None and self.membership is not None, "serve() first"
        await self.membership.drain()
        manager = self.running.manager
        manager.draining = True
        self.pool.changed.set()  # the health check turns NOT_SERVING now
        done = await manager.drain(self.cfg.fleet.drain_timeout_s)
        if not done:
            log.warning("drain timeout: the streams still running are cancelled")
        return done

    async def deploy_version(self, version: ServedVersion) -> None:
        """Admin's RegisterModelVersion or PushModelVersion in the fleet: the version is recorded
        (REGISTERED), every worker host loads it on its own and records it READY
        (serving/version_sync.py), and this waits until one has: it is advertised in a live
        registration and READY in the store. UNAVAILABLE NOT_LOADED after [fleet] deploy_timeout_s
        (it stays recorded: it loads when a host can, and the same push or register, sent again,
        waits again)."""
        assert self.store is not None
        version_id = version.version_id
        await asyncio.to_thread(self._register, version)
        self.registry.statuses.setdefault(version_id, "REGISTERED")  # not READY (nor its health) yet
        self.registry.add_version(version)

        async def loaded() -> bool:
            return self._advertised(version_id) and await asyncio.to_thread(self._ready, version_id)

        if not await self._until(loaded):
            raise Unavailable(
                "NOT_LOADED",
                f"{version_id} is recorded, but no worker host loaded it within "
                f"{self.cfg.fleet.deploy_timeout_s:.0f}s (their logs say why); it loads when one can",
                retry_after_s=None,
            )
        log.info("version %s loaded by the worker hosts", version_id)

    async def undeploy_version(self, version_id: str) -> None:
        """Admin's RetireVersion in the fleet, once the version's generations ended: each worker
        host unloads it on its own (serving/version_sync.py); this waits until no live registration
        advertises it, so RETIRED is recorded after the unloads. TimeoutError after [fleet]
        deploy_timeout_s (the retirement asks again, frontend/admin/rollout.py)."""

        async def gone() -> bool:
            return not self._advertised(version_id)

        if not await self._until(gone):
            raise TimeoutError(f"a worker host still serves {version_id}")
        log.info("version %s unloaded by the worker hosts", version_id)

    def _register(self, version: ServedVersion) -> None:
        assert self.store is not None
        with self.store.transaction() as s:
            exclusive(s, CATALOG_WRITES)
            register_version(s, version_spec(version), now=datetime.now(UTC))

    def _advertised(self, version_id: str) -> bool:
        """In a live registration, as this frontend's worker directory last read them (on the loop)."""
        return any(version_id in w.capacity for w in self.pool.workers.values())

    def _ready(self, version_id: str) -> bool:
        assert self.store is not None
        with self.store.transaction() as s:
            row = s.get(ModelVersion, version_id)
            return row is not None and row.status is ModelVersionStatus.READY

    async def _until(self, condition: Callable[[], Awaitable[bool]]) -> bool:
        """Polls `condition` each registry refresh; False once [fleet] deploy_timeout_s passed
        without it holding."""
        fleet = self.cfg.fleet
        deadline = asyncio.get_running_loop().time() + fleet.deploy_timeout_s
        while not await condition():
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(fleet.registry_refresh_s)
        return True

    def close(self) -> None:
        self.tracer_provider.force_flush()
        if self.store is not None:
            self.store.close()
            self.store = None
