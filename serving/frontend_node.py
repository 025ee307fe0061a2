"""One frontend, whatever feeds its worker pool: `make serve`'s (its own local workers,
serving/platform.py) or a fleet frontend's (the store's worker registry, serving/fleet_frontend.py).

`serve_frontend()` runs the usage aggregator, the generation manager (admission, live runs, lease
renewal and the sweeper), the catalog cache's refresh, the metrics endpoint, the gRPC server and,
when asked, the HTTP server, all over one set of calls (frontend/calls.py); it yields them running
and stops them in reverse order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
from opentelemetry.sdk.trace import TracerProvider

from billing.aggregator import UsageAggregator
from config.settings import PlatformConfig
from console.serve import console_routes
from contracts.tier import BATCH, INTERACTIVE
from datastore.meter import StoreMeter
from datastore.store import Store
from frontend.accounts.admin_calls import TenancyCalls
from frontend.admin.push import Repository
from frontend.admin.rollout import Rollout, Undeploy
from frontend.admin.service import Deploy, admin_service
from frontend.auth import ApiKeyStore
from frontend.calls import FrontendCalls, frontend_calls
from frontend.catalog.cache import CatalogCache, read_catalog
from frontend.catalog.registry import ModelRegistry
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.fair_queue import WaitPredictor
from frontend.dispatch.worker_pool import WorkerPool
from frontend.fleet.relay_client import Forwarding
from frontend.generations.cache_salt import CacheSalts
from frontend.generations.manager import GenerationManager
from frontend.http.server import http_server
from frontend.metrics import FrontendMetrics
from frontend.rpc.server import frontend_server
from frontend.serving_signals import ServingSignals

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(__name__)


def repository_root(cfg: PlatformConfig) -> Path:
    """[repository] path; a relative one is relative to the repository root."""
    path = Path(cfg.repository.path)
    return path if path.is_absolute() else ROOT / path


@dataclass(slots=True)
class FrontendParts:
    """What a frontend serves with; its pool is kept by its owner (local workers or the registry)."""

    cfg: PlatformConfig
    store: Store
    registry: ModelRegistry
    pool: WorkerPool
    keys: ApiKeyStore
    catalog: CatalogCache
    salts: CacheSalts
    tracer_provider: TracerProvider
    frontend_id: str  # recorded as the owner of the generations it admits
    deploy: Deploy  # Admin's RegisterModelVersion: loads a verified version on the workers
    undeploy: Undeploy  # Admin's RetireVersion: unloads a version (by id) from the workers


@dataclass(slots=True)
class RunningFrontend:
    port: int  # the bound gRPC port
    http_port: int  # the bound HTTP port (0: no HTTP)
    metrics_port: int
    server: grpc.aio.Server
    manager: GenerationManager
    metrics: FrontendMetrics
    calls: FrontendCalls
    meter: StoreMeter  # what this frontend asks of the store
    rollout: Rollout  # Admin's roll-out: promotions, rollbacks, retirements under way


def make_dispatcher(cfg: PlatformConfig, pool: WorkerPool) -> Dispatcher:
    f = cfg.frontend
    pool.policy, pool.spill_margin = cfg.routing.policy, cfg.routing.spill_margin
    return Dispatcher(
        pool,
        WaitPredictor(prior_tokens_per_s=f.prefill_tokens_per_s),
        {INTERACTIVE: f.interactive_queue_wait_s, BATCH: f.batch_queue_wait_s},
    )


@asynccontextmanager
async def serve_frontend(
    parts: FrontendParts,
    dispatcher: Dispatcher,
    listen: str,
    http_listen: str,
    forwarding: Forwarding | None = None,
    worker_metrics: Callable[[], list[tuple[str, str]]] = list,
) -> AsyncIterator[RunningFrontend]:
    """Serves gRPC on `listen` and HTTP on `http_listen` ("" for none). worker_metrics: (worker id,
    metrics URL) of the workers whose metrics the endpoint relays."""
    f = parts.cfg.frontend
    store = parts.store
    meter = StoreMeter.attach(store.engine)
    aggregator = UsageAggregator(
        store.sessions, clock=lambda: datetime.now(UTC), max_pending=parts.cfg.store.usage_queue_max
    )
    aggregator.start()
    metrics = FrontendMetrics()
    metrics_port = metrics.serve(f.metrics_listen)
    metrics.relay_workers(worker_metrics)
    metrics.watch_store(meter)
    tracer = parts.tracer_provider.get_tracer("llm.frontend")
    manager = GenerationManager(
        store,
        aggregator,
        dispatcher,
        f,
        parts.cfg.store,
        frontend_id=parts.frontend_id,
        metrics=metrics,
        tracer=tracer,
        salts=parts.salts,
    )
    metrics.watch_retention(manager.live.retention)
    metrics.watch_signals(
        ServingSignals(
            dispatcher, parts.pool, lambda: manager.store_probe.available, lambda: aggregator.pending
        )
    )
    manager.start_background()
    catalog = parts.catalog
    catalog.apply(await asyncio.to_thread(read_catalog, store))  # drain flags of the pool's workers too
    catalog.start()
    repository = Repository(repository_root(parts.cfg), parts.cfg.repository.max_push_bytes)
    await asyncio.to_thread(repository.clear_staging)
    rollout = Rollout(store, parts.registry, repository.root, parts.undeploy, poll_s=f.catalog_refresh_s)
    await asyncio.to_thread(rollout.start)
    tenancy = TenancyCalls(store, catalog.reload_after_write, f.key_rotation_overlap_s)
    admin = admin_service(
        parts.registry, parts.pool, catalog, parts.deploy, rollout, repository, tenancy, dispatcher.pump
    )
    try:
        async with AsyncExitStack() as stack:
            calls = await stack.enter_async_context(
                frontend_calls(parts.registry, manager, f, forwarding, catalog.reload_after_write)
            )
            server, port = await stack.enter_async_context(
                frontend_server(
                    listen,
                    parts.keys,
                    parts.registry,
                    manager,
                    f,
                    admin,
                    health_interval_s=f.worker_probe_interval_s,
                    calls=calls,
                )
            )
            http_port = 0
            if http_listen:
                console = console_routes() if parts.cfg.http.console else []
                http = http_server(http_listen, calls, parts.keys, parts.cfg.http, f, admin.calls, console)
                http_port = await stack.enter_async_context(http)
            yield RunningFrontend(
                port, http_port, metrics_port, server, manager, metrics, calls, meter, rollout
            )
    finally:
        await rollout.close()
        await catalog.close()
        await manager.shutdown()
        unwritten = await aggregator.close()
        if unwritten:
            log.error("%d usage reports could not be written", unwritten)
        metrics.close()
        meter.detach()
        parts.tracer_provider.force_flush()
