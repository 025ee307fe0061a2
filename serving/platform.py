"""Assembles the platform on one machine (`make serve`): model artifacts, the Triton workers, and a
frontend that routes to them.

`Platform.start_workers()` opens the store (migrating it), seeds it with the config (frontend/
catalog.py; the store is the authority) and starts the local workers (serving/worker_set.py);
`Platform.frontend()` then runs the frontend against them (serving/frontend_node.py: gRPC, and
HTTP/JSON on [http] listen), with a supervisor that restarts a worker that dies and heartbeats the
worker registry. Used by `make serve` (serving/__main__.py), `start_platform` and the end-to-end
tests. The fleet shape runs the same two halves as separate processes (serving/fleet_frontend.py,
serving/worker_host.py).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
from opentelemetry.sdk.trace import SpanProcessor

from artifacts.manifest import remember_checks_in
from config.loader import check_loopback_only
from config.settings import PlatformConfig
from datastore.store import Store, open_store
from frontend.admin.rollout import Rollout
from frontend.auth import ApiKeyStore
from frontend.catalog.cache import CatalogCache, mark_ready, read_catalog, seed_catalog, store_url
from frontend.catalog.registry import ModelRegistry, ServedVersion
from frontend.dispatch.worker_pool import WorkerPool
from frontend.generations.cache_salt import CacheSalts
from frontend.generations.manager import GenerationManager
from frontend.generations.telemetry import tracer_provider
from frontend.metrics import FrontendMetrics
from serving.frontend_node import FrontendParts, make_dispatcher, serve_frontend
from serving.supervisor import Supervisor
from serving.triton import TritonServer
from serving.worker_set import LocalWorkers
from serving.workers import PREFIX_SUMMARY_DIR, VERIFIED_DIR, LocalWorker, kv_blocks

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(__name__)


class Platform:
    def __init__(
        self, cfg: PlatformConfig, work_dir: Path | None = None, span_processor: SpanProcessor | None = None
    ) -> None:
        """span_processor: an extra span processor (tests pass one with an in-memory exporter)."""
        check_loopback_only(cfg)
        self.cfg = cfg
        work = Path(cfg.triton.work_dir) if work_dir is None else work_dir
        self.work_dir = work if work.is_absolute() else ROOT / work
        self.registry = ModelRegistry()
        self.pool = WorkerPool()
        self.keys = ApiKeyStore(admin_keys=cfg.frontend.admin_api_keys, fetch_keys=(cfg.fleet.worker_key,))
        self.local = LocalWorkers(cfg, self.work_dir)
        self.frontend_id = f"platform-{secrets.token_hex(6)}"  # this launch, owner of what it admits
        self.store: Store | None = None
        self.manager: GenerationManager | None = None  # while frontend() runs
        self.metrics: FrontendMetrics | None = None  # while frontend() runs
        self.rollout: Rollout | None = None  # while frontend() runs
        self.metrics_port = 0  # the bound port of [frontend] metrics_listen
        self.http_port = 0  # the bound port of [http] listen, while frontend() runs (0: no HTTP)
        self._catalog: CatalogCache | None = None
        self.cache_salts = CacheSalts.generate()  # for the platform's life: its workers' caches
        self.tracer_provider = tracer_provider(cfg.telemetry, span_processor)

    @property
    def workers(self) -> list[LocalWorker]:
        return self.local.workers

    @property
    def catalog(self) -> CatalogCache:
        """The cache of the store's catalog (routes, tenants and keys, drain flags)."""
        assert self.store is not None, "start_workers() first"
        if self._catalog is None or self._catalog.store is not self.store:
            refresh_s = self.cfg.frontend.catalog_refresh_s
            share = self.cfg.frontend.max_tenant_kv_share
            self._catalog = CatalogCache(self.store, self.registry, self.keys, self.pool, refresh_s, share)
        return self._catalog

    @property
    def triton(self) -> TritonServer | None:
        """The first worker's server (the only one with the default config)."""
        return self.workers[0].server if self.workers else None

    def start_workers(self) -> None:
        """Opens the store (migrating it) and seeds it with the config, starts the Triton workers
        and loads what the store says to serve: the configured versions (`[[models]] workers = N`:
        on the first N workers) and every other READY version (registered through Admin: on every
        worker). Then records them READY and loads the catalog cache. Artifact files verified by an
        earlier start and unchanged since are not hashed again (var/verified)."""
        remember_checks_in(VERIFIED_DIR)
        self.store = open_store(store_url(self.cfg.store.url), timeout_s=self.cfg.store.timeout_s)
        try:
            configured = self.local.configured()
            routes = [(m.alias, v) for m, v in configured]
            seed_catalog(self.store, self.cfg.tenants, routes, now=datetime.now(UTC))
            self.local.start(self.store, configured)
            for model, version in self.local.deployments:
                self.registry.add_version(version)
                self.pool.block_size[version.version_id] = model.block_size
            self.catalog.apply(read_catalog(self.store))
        except Exception:
            self.stop_workers()
            raise

    def stop_workers(self) -> None:
        self.local.stop()
        self.tracer_provider.force_flush()
        if self.store is not None:
            self.store.close()
            self.store = None

    @asynccontextmanager
    async def frontend(
        self, listen: str | None = None, http_listen: str | None = None
    ) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
        """Runs the frontend: gRPC on `listen` ([frontend] listen when None), yielding (server,
        bound port), and HTTP on `http_listen` ([http] listen when None; "" for none), its bound
        port in `http_port`. Both serve the same calls."""
        assert self.workers and self.store is not None, "start_workers() first"
        f = self.cfg.frontend
        for handle in self.local.handles(f.worker_inactivity_timeout_s):
            self.pool.add(handle)
        dispatcher = make_dispatcher(self.cfg, self.pool)
        supervisor = Supervisor(
            self.workers,
            self.pool,
            self.store,
            dispatcher.pump,
            probe_interval_s=f.worker_probe_interval_s,
            inactivity_timeout_s=f.worker_inactivity_timeout_s,
            summary_dir=PREFIX_SUMMARY_DIR if self.cfg.routing.summary_blocks else None,
        )
        await asyncio.to_thread(supervisor.heartbeat)  # registered before Admin can name them
        supervisor.start()
        parts = FrontendParts(
            self.cfg,
            self.store,
            self.registry,
            self.pool,
            self.keys,
            self.catalog,
            self.cache_salts,
            self.tracer_provider,
            self.frontend_id,
            self.deploy_version,
            self.undeploy_version,
        )
        relayed = [(w.worker_id, f"http://127.0.0.1:{w.server.metrics_port}/metrics") for w in self.workers]
        http_at = self.cfg.http.listen if http_listen is None else http_listen
        try:
            async with serve_frontend(
                parts, dispatcher, listen or f.listen, http_at, worker_metrics=lambda: relayed
            ) as node:
                self.manager, self.metrics, self.metrics_port = node.manager, node.metrics, node.metrics_port
                self.http_port, self.rollout = node.http_port, node.rollout
                yield node.server, node.port
        finally:
            self.http_port, self.rollout = 0, None
            self.manager = None
            await supervisor.close()
            for handle in self.pool.workers.values():
                await handle.client.close()
            self.pool.workers.clear()

    async def deploy_version(self, version: ServedVersion) -> None:
        """Loads a verified version on every worker (with the settings of the configured model of
        the same name, else the defaults), makes it routable and records it READY."""
        assert self.store is not None
        settings = self.local.settings_for(version)
        await asyncio.to_thread(self.local.load_everywhere, settings, version)
        await asyncio.to_thread(mark_ready, self.store, [version], now=datetime.now(UTC))
        self.registry.add_version(version)
        self.pool.block_size[version.version_id] = settings.block_size
        for worker in self.workers:
            self.pool.workers[worker.worker_id].capacity[version.version_id] = kv_blocks(settings)
        log.info("version %s deployed on %d worker(s)", version.version_id, len(self.workers))

    async def undeploy_version(self, version_id: str) -> None:
        """Unloads a version from every worker (RetireVersion, once its generations ended): no
        longer routable, and not reloaded when a worker restarts."""
        for handle in self.pool.workers.values():
            handle.capacity.pop(version_id, None)
        await asyncio.to_thread(self.local.unload_everywhere, version_id)
        log.info("version %s unloaded from %d worker(s)", version_id, len(self.workers))


@dataclass(slots=True, frozen=True)
class RunningPlatform:
    address: str  # host:port of the gRPC frontend
    platform: Platform
    http_address: str = ""  # host:port of the HTTP API ("" when it serves none)


@asynccontextmanager
async def start_platform(
    cfg: PlatformConfig, work_dir: Path | None = None, listen: str = "127.0.0.1:0", http_listen: str = ""
) -> AsyncIterator[RunningPlatform]:
    """Starts the workers and the frontend (what `make serve` runs), yields its addresses, and stops
    all of it on exit: the public way to run the platform from Python (benchmarks, tools). HTTP is
    served only when `http_listen` names an address ("127.0.0.1:0")."""
    platform = Platform(cfg, work_dir=work_dir)
    await asyncio.to_thread(platform.start_workers)
    try:
        async with platform.frontend(listen, http_listen) as (_, port):
            host = listen.rpartition(":")[0] or "127.0.0.1"
            http_host = http_listen.rpartition(":")[0] or "127.0.0.1"
            http = f"{http_host}:{platform.http_port}" if http_listen else ""
            yield RunningPlatform(f"{host}:{port}", platform, http)
    finally:
        await asyncio.to_thread(platform.stop_workers)
