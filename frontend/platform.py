"""Assembles the platform on one machine: model artifacts, the Triton worker, and the frontend.

`Platform.start_workers()` verifies (or builds) each model's artifact, materializes the Triton
model repository, starts one `tritonserver` per worker and loads its versions; `Platform.frontend()`
then runs the gRPC frontend against them, with a supervisor that restarts a worker that dies.
Used by `make serve` (frontend/serve.py) and the end-to-end tests.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import grpc
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

from billing.aggregator import UsageAggregator
from contracts.capacity import DEFAULT_KV_CACHE_BLOCKS
from contracts.tier import BATCH, INTERACTIVE
from control.model_versions import register_version, set_version_status
from control.models import ModelVersionStatus
from control.store import Store, open_store
from frontend.admin import AdminService
from frontend.admission import WaitPredictor
from frontend.auth import ApiKeyStore
from frontend.catalog import record_catalog, store_url, version_spec
from frontend.config import (
    DEFAULT_MODEL_SOURCE,
    LOCAL_ADMIN_KEY,
    LOCAL_API_KEY,
    ConfigError,
    ModelSettings,
    PlatformConfig,
    TelemetrySettings,
)
from frontend.generations import GatewaySettings, GenerationManager
from frontend.metrics import FrontendMetrics
from frontend.registry import ModelRegistry, ServedVersion, load_version
from frontend.routing import Dispatcher, WorkerHandle, WorkerPool
from frontend.server import frontend_server
from frontend.supervisor import Supervisor
from frontend.worker import TritonWorker
from serving.deployment import ModelDeployment, materialize_repository
from serving.triton import TritonServer

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(__name__)


def artifact_for(model: ModelSettings) -> Path:
    """The verified artifact folder of a `[[models]]` entry, in its `quantization` scheme (built from
    the GGUF, and quantized from the plain artifact, if needed)."""
    from prebuild.artifact import DEFAULT_NAME, ensure_artifact, ensure_quantized

    if model.source == DEFAULT_MODEL_SOURCE:
        return ensure_artifact(DEFAULT_NAME, quantization=model.quantization)
    path = Path(model.source)
    if not path.is_absolute():
        path = ROOT / path
    if not (path / "manifest.json").is_file():
        raise ConfigError(f"model {model.alias}: source {model.source!r} is not an artifact folder")
    try:
        return ensure_quantized(path, model.quantization)
    except ValueError as e:
        raise ConfigError(f"model {model.alias}: {e}") from e


def check_loopback_only(cfg: PlatformConfig) -> None:
    """The development keys may only be served on a loopback address."""
    local_admin = LOCAL_ADMIN_KEY in cfg.frontend.admin_api_keys
    if not local_admin and not any(LOCAL_API_KEY in t.api_keys for t in cfg.tenants):
        return
    host = cfg.frontend.listen.rpartition(":")[0].strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(
            f"the development API keys may only be served on loopback, not {cfg.frontend.listen}"
        )


@dataclass(slots=True)
class LocalWorker:
    """One `tritonserver` process this platform started, and the versions it loads."""

    worker_id: str
    server: TritonServer
    versions: list[tuple[ModelSettings, ServedVersion]]

    def load(self) -> None:
        for _, version in self.versions:
            self.server.load_model(version.triton_model_name)


def _port(base: int, index: int) -> int:
    """Worker i's port: the configured one plus 100 * i (0 stays 0: a free port)."""
    return base + 100 * index if base else 0


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
        self.workers: list[LocalWorker] = []
        self.store: Store | None = None
        self.manager: GenerationManager | None = None  # while frontend() runs
        self.metrics: FrontendMetrics | None = None  # while frontend() runs
        self.metrics_port = 0  # the bound port of [frontend] metrics_listen
        self.pool = WorkerPool()
        self._settings: dict[str, ModelSettings] = {}  # model name -> its [[models]] settings
        self.tracer_provider = tracer_provider(cfg.telemetry, span_processor)

    @property
    def triton(self) -> TritonServer | None:
        """The first worker's server (the only one with the default config)."""
        return self.workers[0].server if self.workers else None

    def start_workers(self) -> None:
        """Opens the store (migrating it), starts the Triton workers, loads their versions,
        records the catalog. `[[models]] workers = N` runs the model on the first N workers."""
        self.store = open_store(store_url(self.cfg.store.url))
        deployments: list[tuple[ModelSettings, ServedVersion]] = []
        for model in self.cfg.models:
            version = load_version(artifact_for(model))
            deployments.append((model, version))
        threads = engine_threads(self.cfg)
        repo = materialize_repository(
            [deployment(m, v, threads) for m, v in deployments], self.work_dir / "models"
        )
        t = self.cfg.triton
        tel = self.cfg.telemetry
        try:
            for i in range(max(m.workers for m, _ in deployments)):
                server = TritonServer(
                    repo,
                    self.work_dir,
                    _port(t.grpc_port, i),
                    _port(t.http_port, i),
                    _port(t.metrics_port, i),
                    t.exit_timeout_s,
                    trace_url=tel.otlp_endpoint if tel.worker_traces else "",
                )
                worker = LocalWorker(f"local-{i}", server, [(m, v) for m, v in deployments if m.workers > i])
                self.workers.append(worker)
                server.start()
                worker.load()
                log.info("worker %s ready on %s", worker.worker_id, server.grpc_url)
            for model, version in deployments:
                self.registry.add(model.alias, version)
                self._settings.setdefault(version.manifest.name, model)
                self.pool.block_size[version.version_id] = model.block_size
            record_catalog(self.store, self.cfg, self.registry, now=datetime.now(UTC))
        except Exception:
            self.stop_workers()
            raise

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.server.stop()
        self.workers = []
        self.tracer_provider.force_flush()
        if self.store is not None:
            self.store.close()
            self.store = None

    @asynccontextmanager
    async def frontend(self, listen: str | None = None) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
        assert self.workers and self.store is not None, "start_workers() first"
        for w in self.workers:
            self.pool.add(
                WorkerHandle(
                    worker_id=w.worker_id,
                    address=w.server.grpc_url,
                    client=TritonWorker(w.server.grpc_url),
                    capacity={v.version_id: kv_blocks(m) for m, v in w.versions},
                    last_heartbeat=time.time(),
                )
            )
        aggregator = UsageAggregator(self.store.sessions, clock=lambda: datetime.now(UTC))
        aggregator.start()
        f = self.cfg.frontend
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
            self.store, aggregator, dispatcher, settings, metrics=metrics, tracer=tracer
        )
        self.manager.start_background()
        supervisor = Supervisor(self.workers, self.pool, self.store, dispatcher)
        supervisor.start()
        try:
            async with frontend_server(
                listen or f.listen,
                ApiKeyStore(self.cfg.tenants, f.admin_api_keys),
                self.registry,
                self.manager,
                f.converse_window_events,
                AdminService(self.registry, self.pool, self.store, self.deploy_version),
            ) as bound:
                yield bound
        finally:
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
        self.registry.add_version(version)
        self.pool.block_size[version.version_id] = settings.block_size
        for worker in self.workers:
            self.pool.workers[worker.worker_id].capacity[version.version_id] = kv_blocks(settings)
        await asyncio.to_thread(self._record_version, version)
        log.info("version %s deployed on %d worker(s)", version.version_id, len(self.workers))

    def _load_everywhere(self, settings: ModelSettings, version: ServedVersion) -> None:
        deployed = deployment(settings, version, engine_threads(self.cfg))
        materialize_repository([deployed], self.work_dir / "models")
        for worker in self.workers:
            worker.server.load_model(version.triton_model_name)
            worker.versions.append((settings, version))  # reloaded if the worker restarts

    def _record_version(self, version: ServedVersion) -> None:
        assert self.store is not None
        now = datetime.now(UTC)
        with self.store.transaction() as s:
            register_version(s, version_spec(version), now=now)
            set_version_status(s, version.version_id, ModelVersionStatus.READY, now=now)


def engine_threads(cfg: PlatformConfig, cpus: int | None = None, env: dict[str, str] | None = None) -> int:
    """Torch threads for each engine this platform starts: OMP_NUM_THREADS when the operator set it,
    else the CPUs this process may use shared out among the configured models' engines (one per
    worker each), at least one. Busy engines whose OpenMP threads together outnumber the cores wait
    for each other's preempted threads at every parallel region (docs/architecture.md, "Threads on
    a worker")."""
    env = dict(os.environ) if env is None else env
    if env.get("OMP_NUM_THREADS", "").strip().isdigit() and int(env["OMP_NUM_THREADS"]) > 0:
        return int(env["OMP_NUM_THREADS"])
    cpus = len(os.sched_getaffinity(0)) if cpus is None else cpus
    engines = sum(m.workers for m in cfg.models)
    return max(1, cpus // max(1, engines))


def deployment(m: ModelSettings, v: ServedVersion, intra_op_threads: int = 0) -> ModelDeployment:
    return ModelDeployment(
        triton_model_name=v.triton_model_name,
        artifact_dir=v.artifact_dir,
        version=v.manifest.version,
        dtype=m.dtype,  # "auto" is resolved by the worker, on its own CPU
        block_size=m.block_size,
        kv_cache_blocks=kv_blocks(m),
        max_num_seqs=m.max_num_seqs,
        max_num_batched_tokens=m.max_num_batched_tokens,
        scheduler_policy=m.scheduler_policy,
        fair_share=m.fair_share,
        intra_op_threads=intra_op_threads,
    )


def tracer_provider(cfg: TelemetrySettings, extra: SpanProcessor | None) -> TracerProvider:
    """The frontend's tracer provider: OTLP/HTTP when configured, console when asked, `extra`."""
    provider = TracerProvider(resource=Resource.create({"service.name": "llm-frontend"}))
    if cfg.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=cfg.otlp_endpoint)))
    if cfg.console_traces:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    if extra is not None:
        provider.add_span_processor(extra)
    return provider


def kv_blocks(model: ModelSettings) -> int:
    return model.kv_cache_blocks or DEFAULT_KV_CACHE_BLOCKS
