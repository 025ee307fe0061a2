"""Assembles the platform on one machine: model artifacts, the Triton worker, and the frontend.

`Platform.start_workers()` verifies (or builds) each model's artifact, materializes the Triton
model repository, starts `tritonserver` and loads every version; `Platform.frontend()` then runs
the gRPC frontend against it. Used by `make serve` (frontend/serve.py) and the end-to-end tests.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import grpc

from billing.aggregator import UsageAggregator
from build.triton import ModelDeployment, TritonServer, materialize_repository
from control.store import Store, open_store
from frontend.auth import ApiKeyStore
from frontend.catalog import record_catalog, store_url
from frontend.config import DEFAULT_MODEL_SOURCE, LOCAL_API_KEY, ConfigError, ModelSettings, PlatformConfig
from frontend.generations import GatewaySettings, GenerationManager
from frontend.registry import ModelRegistry, ServedVersion, load_version
from frontend.server import frontend_server
from frontend.worker import TritonWorker

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger(__name__)


def artifact_for(model: ModelSettings) -> Path:
    """The verified artifact folder of a `[[models]]` entry (built from the GGUF if needed)."""
    if model.source == DEFAULT_MODEL_SOURCE:
        from build.artifact import DEFAULT_NAME, ensure_artifact

        return ensure_artifact(DEFAULT_NAME)
    path = Path(model.source)
    if not path.is_absolute():
        path = ROOT / path
    if not (path / "manifest.json").is_file():
        raise ConfigError(f"model {model.alias}: source {model.source!r} is not an artifact folder")
    return path


def check_loopback_only(cfg: PlatformConfig) -> None:
    """The development key may only be served on a loopback address."""
    if not any(LOCAL_API_KEY in t.api_keys for t in cfg.tenants):
        return
    host = cfg.frontend.listen.rpartition(":")[0].strip("[]")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(
            f"the development API key may only be served on loopback, not {cfg.frontend.listen}"
        )


class Platform:
    def __init__(self, cfg: PlatformConfig, work_dir: Path | None = None) -> None:
        check_loopback_only(cfg)
        self.cfg = cfg
        work = Path(cfg.triton.work_dir) if work_dir is None else work_dir
        self.work_dir = work if work.is_absolute() else ROOT / work
        self.registry = ModelRegistry()
        self.triton: TritonServer | None = None
        self.store: Store | None = None

    def start_workers(self) -> TritonServer:
        """Opens the store (migrating it), starts Triton, loads every version, records the catalog."""
        self.store = open_store(store_url(self.cfg.store.url))
        deployments: list[tuple[ModelSettings, ServedVersion]] = []
        for model in self.cfg.models:
            version = load_version(artifact_for(model))
            deployments.append((model, version))
        repo = materialize_repository(
            [
                ModelDeployment(
                    triton_model_name=v.triton_model_name,
                    artifact_dir=v.artifact_dir,
                    version=v.manifest.version,
                    instances=m.workers,
                    dtype=m.dtype,
                    block_size=m.block_size,
                    kv_cache_blocks=m.kv_cache_blocks,
                    max_num_seqs=m.max_num_seqs,
                    max_num_batched_tokens=m.max_num_batched_tokens,
                    scheduler_policy=m.scheduler_policy,
                )
                for m, v in deployments
            ],
            self.work_dir / "models",
        )
        t = self.cfg.triton
        self.triton = TritonServer(
            repo, self.work_dir, t.grpc_port, t.http_port, t.metrics_port, t.exit_timeout_s
        ).start()
        try:
            for model, version in deployments:
                self.triton.load_model(version.triton_model_name)
                self.registry.add(model.alias, version)
                log.info("worker ready: %s serves %s", model.alias, version.version_id)
            record_catalog(self.store, self.cfg, self.registry, now=datetime.now(UTC))
        except Exception:
            self.stop_workers()
            raise
        return self.triton

    def stop_workers(self) -> None:
        if self.triton is not None:
            self.triton.stop()
            self.triton = None
        if self.store is not None:
            self.store.close()
            self.store = None

    @asynccontextmanager
    async def frontend(self, listen: str | None = None) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
        assert self.triton is not None and self.store is not None, "start_workers() first"
        worker = TritonWorker(self.triton.grpc_url)
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
        manager = GenerationManager(self.store, aggregator, worker, settings)
        try:
            async with frontend_server(
                listen or f.listen,
                ApiKeyStore(self.cfg.tenants),
                self.registry,
                manager,
                f.converse_window_events,
            ) as bound:
                yield bound
        finally:
            await manager.shutdown()
            unwritten = await aggregator.close()
            if unwritten:
                log.error("%d usage reports could not be written", unwritten)
            await worker.close()
