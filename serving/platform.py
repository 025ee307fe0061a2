"""Assembles the platform on one machine: model artifacts, the Triton worker, and the frontend.

`Platform.start_workers()` verifies (or builds) each model's artifact, seeds the control store with
the config (frontend/catalog.py; the store is the authority), materializes the Triton model
repository, starts one `tritonserver` per worker and loads the versions the store says to serve;
`Platform.frontend()` then runs the frontend against them (gRPC, and HTTP/JSON on [http] listen),
with a supervisor that restarts a worker that dies and a cache of the catalog that follows the store.
Used by `make serve` (serving/__main__.py), `start_platform` and the end-to-end tests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import grpc
from opentelemetry.sdk.trace import SpanProcessor

from billing.aggregator import UsageAggregator
from contracts.tier import BATCH, INTERACTIVE
from datastore.store import Store, open_store
from engine.artifact import ArtifactIntegrityError
from frontend.admin import AdminService
from frontend.admission import WaitPredictor
from frontend.auth import ApiKeyStore
from frontend.cache_salt import CacheSalts
from frontend.calls import frontend_calls
from frontend.catalog import CatalogCache, mark_ready, read_catalog, seed_catalog, served_versions, store_url
from frontend.config import ModelSettings, PlatformConfig, check_loopback_only
from frontend.generations import GatewaySettings, GenerationManager
from frontend.http.server import http_server
from frontend.metrics import FrontendMetrics
from frontend.registry import ModelRegistry, ServedVersion, load_version
from frontend.routing import Dispatcher
from frontend.server import frontend_server
from frontend.telemetry import tracer_provider
from frontend.worker import TritonWorker
from frontend.worker_pool import WorkerHandle, WorkerPool
from serving.deployment import materialize_repository
from serving.supervisor import Supervisor
from serving.triton import TritonServer
from serving.workers import LocalWorker, artifact_for, deployment, engine_threads, kv_blocks, worker_port

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
        self.keys = ApiKeyStore(admin_keys=cfg.frontend.admin_api_keys)
        self.workers: list[LocalWorker] = []
        self.store: Store | None = None
        self.manager: GenerationManager | None = None  # while frontend() runs
        self.metrics: FrontendMetrics | None = None  # while frontend() runs
        self.metrics_port = 0  # the bound port of [frontend] metrics_listen
        self.http_port = 0  # the bound port of [http] listen, while frontend() runs (0: no HTTP)
        self._settings: dict[str, ModelSettings] = {}  # model name -> its [[models]] settings
        self._catalog: CatalogCache | None = None
        self.cache_salts = CacheSalts.generate()  # for the platform's life: its workers' caches
        self.tracer_provider = tracer_provider(cfg.telemetry, span_processor)

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
        worker). Then records them READY and loads the catalog cache."""
        self.store = open_store(store_url(self.cfg.store.url))
        configured = [(model, load_version(artifact_for(model))) for model in self.cfg.models]
        seed_catalog(
            self.store, self.cfg.tenants, [(m.alias, v) for m, v in configured], now=datetime.now(UTC)
        )
        for model, version in configured:
            self._settings.setdefault(version.manifest.name, model)
        stored = self._stored_versions({v.version_id for _, v in configured})
        deployments = configured + stored
        threads = engine_threads(self.cfg)
        repo = materialize_repository(
            [deployment(m, v, threads) for m, v in deployments], self.work_dir / "models"
        )
        t = self.cfg.triton
        tel = self.cfg.telemetry
        try:
            for i in range(max(m.workers for m, _ in configured)):
                server = TritonServer(
                    repo,
                    self.work_dir,
                    worker_port(t.grpc_port, i),
                    worker_port(t.http_port, i),
                    worker_port(t.metrics_port, i),
                    t.exit_timeout_s,
                    trace_url=tel.otlp_endpoint if tel.worker_traces else "",
                )
                versions = [(m, v) for m, v in configured if m.workers > i] + stored
                worker = LocalWorker(f"local-{i}", server, versions)
                self.workers.append(worker)
                server.start()
                worker.load()
                log.info("worker %s ready on %s", worker.worker_id, server.grpc_url)
            for model, version in deployments:
                self.registry.add_version(version)
                self.pool.block_size[version.version_id] = model.block_size
            mark_ready(self.store, [v for _, v in deployments], now=datetime.now(UTC))
            self.catalog.apply(read_catalog(self.store))
        except Exception:
            self.stop_workers()
            raise

    def _stored_versions(self, configured: set[str]) -> list[tuple[ModelSettings, ServedVersion]]:
        """The READY versions in the store the config does not name, verified, each with the
        settings of the configured model of its name (else the defaults). One whose artifact is
        gone or fails verification is logged and left out."""
        assert self.store is not None
        found = []
        for version_id, path in served_versions(self.store):
            if version_id in configured:
                continue
            try:
                version = load_version(path)
            except (ArtifactIntegrityError, OSError, KeyError, ValueError) as e:
                log.error("version %s: artifact %s failed verification (%s); not served", version_id, path, e)
                continue
            found.append((self._settings.get(version.manifest.name, ModelSettings()), version))
        return found

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.server.stop()
        self.workers = []
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
        for w in self.workers:
            self.pool.add(
                WorkerHandle(
                    worker_id=w.worker_id,
                    address=w.server.grpc_url,
                    client=TritonWorker(
                        w.server.grpc_url,
                        inactivity_timeout_s=f.worker_inactivity_timeout_s,
                        headers=w.server.grpc_headers,
                    ),
                    capacity={v.version_id: kv_blocks(m) for m, v in w.versions},
                    last_heartbeat=time.time(),
                )
            )
        aggregator = UsageAggregator(self.store.sessions, clock=lambda: datetime.now(UTC))
        aggregator.start()
        settings = GatewaySettings(
            grace_s=f.disconnect_grace_s,
            retain_s=f.stream_retain_s,
            max_events=f.stream_max_events,
            max_bytes=f.stream_max_bytes,
            slow_consumer_timeout_s=f.slow_consumer_timeout_s,
        )
        dispatcher = Dispatcher(
            self.pool,
            WaitPredictor(prior_tokens_per_s=f.prefill_tokens_per_s),
            {INTERACTIVE: f.interactive_queue_wait_s, BATCH: f.batch_queue_wait_s},
        )
        metrics = self.metrics = FrontendMetrics()
        self.metrics_port = metrics.serve(f.metrics_listen)
        metrics.relay_workers(
            lambda: [(w.worker_id, f"http://127.0.0.1:{w.server.metrics_port}/metrics") for w in self.workers]
        )
        tracer = self.tracer_provider.get_tracer("llm.frontend")
        self.manager = GenerationManager(
            self.store,
            aggregator,
            dispatcher,
            settings,
            metrics=metrics,
            tracer=tracer,
            salts=self.cache_salts,
        )
        self.manager.start_background()
        supervisor = Supervisor(
            self.workers,
            self.pool,
            self.store,
            dispatcher,
            probe_interval_s=f.worker_probe_interval_s,
            inactivity_timeout_s=f.worker_inactivity_timeout_s,
        )
        await asyncio.to_thread(supervisor.heartbeat)  # registered before Admin can name them
        self.catalog.apply(await asyncio.to_thread(read_catalog, self.store))  # drain flags too
        supervisor.start()
        self.catalog.start()
        http_at = self.cfg.http.listen if http_listen is None else http_listen
        try:
            async with AsyncExitStack() as stack:
                calls = await stack.enter_async_context(frontend_calls(self.registry, self.manager, f))
                bound = await stack.enter_async_context(
                    frontend_server(
                        listen or f.listen,
                        self.keys,
                        self.registry,
                        self.manager,
                        f,
                        AdminService(
                            self.registry, self.pool, self.catalog, self.deploy_version, dispatcher.pump
                        ),
                        health_interval_s=f.worker_probe_interval_s,
                        calls=calls,
                    )
                )
                if http_at:
                    http = http_server(http_at, calls, self.keys, self.cfg.http, f)
                    self.http_port = await stack.enter_async_context(http)
                yield bound
        finally:
            self.http_port = 0
            await self.catalog.close()
            await supervisor.close()
            await self.manager.shutdown()
            self.manager = None
            unwritten = await aggregator.close()
            if unwritten:
                log.error("%d usage reports could not be written", unwritten)
            metrics.close()
            self.tracer_provider.force_flush()
            for handle in self.pool.workers.values():
                await handle.client.close()
            self.pool.workers.clear()

    async def deploy_version(self, version: ServedVersion) -> None:
        """Loads a verified version on every worker (with the settings of the configured model of
        the same name, else the defaults), makes it routable and records it READY."""
        assert self.store is not None
        settings = self._settings.get(version.manifest.name, ModelSettings())
        await asyncio.to_thread(self._load_everywhere, settings, version)
        assert self.store is not None
        await asyncio.to_thread(mark_ready, self.store, [version], now=datetime.now(UTC))
        self.registry.add_version(version)
        self.pool.block_size[version.version_id] = settings.block_size
        for worker in self.workers:
            self.pool.workers[worker.worker_id].capacity[version.version_id] = kv_blocks(settings)
        log.info("version %s deployed on %d worker(s)", version.version_id, len(self.workers))

    def _load_everywhere(self, settings: ModelSettings, version: ServedVersion) -> None:
        deployed = deployment(settings, version, engine_threads(self.cfg))
        materialize_repository([deployed], self.work_dir / "models")
        for worker in self.workers:
            worker.server.load_model(version.triton_model_name)
            worker.versions.append((settings, version))  # reloaded if the worker restarts
