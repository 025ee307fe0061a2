"""The Triton workers one process tree runs (`make serve`'s, or a worker host's, serving/worker_host.py):
each configured model's artifact verified (or built), the store's other READY versions found again,
the model repository written, one `tritonserver` per worker started with its versions loaded, and
the versions recorded READY in the store (control/model_versions.py via frontend/catalog/cache.py).

Worker i serves every configured model with `workers > i`, and every version registered at run time
(through Admin); its ports are the configured ones plus 100 * i, and its id is `worker_id()`'s.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from artifacts.manifest import ArtifactIntegrityError
from config.settings import ModelSettings, PlatformConfig
from datastore.store import Store
from frontend.catalog.cache import mark_ready, served_versions
from frontend.catalog.registry import ServedVersion, load_version
from frontend.dispatch.worker_client import TritonWorker
from frontend.dispatch.worker_pool import WorkerHandle
from serving.artifact_fetch import Fetch
from serving.triton import TritonServer
from serving.workers import (
    LocalWorker,
    artifact_for,
    deployment,
    engine_threads,
    kv_blocks,
    worker_id,
    worker_port,
)
from worker.deployment import materialize_repository

log = logging.getLogger(__name__)
Deployed = tuple[ModelSettings, ServedVersion]


class LocalWorkers:
    def __init__(
        self, cfg: PlatformConfig, work_dir: Path, access_key: str | None = None, fetch: Fetch | None = None
    ) -> None:
        """access_key: the Triton access key of every server (None: each draws its own). fetch:
        downloads a version this host lacks, verified (serving/artifact_fetch.py; None: none)."""
        self.cfg = cfg
        self.fetch = fetch
        self.work_dir = work_dir
        self.access_key = access_key
        self.workers: list[LocalWorker] = []
        self.deployments: list[Deployed] = []  # every version the workers serve, with its settings
        self._settings: dict[str, ModelSettings] = {}  # model name -> its [[models]] settings

    def configured(self) -> list[Deployed]:
        """The configured models' verified versions (built from the GGUF or quantized if needed)."""
        configured = [(model, load_version(artifact_for(model))) for model in self.cfg.models]
        for model, version in configured:
            self._settings.setdefault(version.manifest.name, model)
        return configured

    @property
    def _trace_url(self) -> str:
        """Where Triton's spans and each request's engine span go ("": nowhere)."""
        tel = self.cfg.telemetry
        return tel.otlp_endpoint if tel.worker_traces else ""

    def settings_for(self, version: ServedVersion) -> ModelSettings:
        """The settings of the configured model of the version's name, else the defaults."""
        return self._settings.get(version.manifest.name, ModelSettings())

    def start(self, store: Store, configured: list[Deployed]) -> None:
        """Starts every worker and loads its versions, then records them READY; on failure, stops
        what it started and raises (TritonError for a port in use or a server that would not start)."""
        stored = self._stored_versions(store, {v.version_id for _, v in configured})
        deployments = configured + stored
        repo = self.work_dir / "models"
        repo.mkdir(parents=True, exist_ok=True)
        t, w = self.cfg.triton, self.cfg.worker
        try:
            for i in range(max(m.workers for m, _ in configured)):
                server = TritonServer(
                    repo,
                    self.work_dir,
                    worker_port(t.grpc_port, i),
                    worker_port(t.http_port, i),
                    worker_port(t.metrics_port, i),
                    t.exit_timeout_s,
                    trace_url=self._trace_url,
                    host=w.host,
                    access_key=self.access_key,
                )
                versions = [(m, v) for m, v in configured if m.workers > i] + stored
                address = f"{w.advertise_host}:{server.grpc_port}" if w.advertise_host else ""
                self.workers.append(LocalWorker(worker_id(w, server.grpc_port, i), server, versions, address))
            for worker in self.workers:  # they start (~1.5 s) while the repository is written
                worker.server.launch()
            threads = engine_threads(self.cfg)
            deployed = [
                deployment(m, v, threads, self._trace_url, self.cfg.routing.summary_blocks, self.cfg.models)
                for m, v in deployments
            ]
            materialize_repository(deployed, repo)
            for worker in self.workers:
                worker.server.wait_live()
                worker.load()
                log.info("worker %s ready on %s", worker.worker_id, worker.advertised)
            mark_ready(store, [v for _, v in deployments], now=datetime.now(UTC))
        except Exception:
            self.stop()
            raise
        self.deployments = deployments

    def _stored_versions(self, store: Store, configured: set[str]) -> list[Deployed]:
        return [(self.settings_for(v), v) for v in stored_versions(store, configured, self.fetch)]

    def load_everywhere(self, settings: ModelSettings, version: ServedVersion) -> None:
        """Loads a verified version on every worker (blocking); reloaded if a worker restarts."""
        deployed = deployment(
            settings,
            version,
            engine_threads(self.cfg),
            self._trace_url,
            self.cfg.routing.summary_blocks,
            self.cfg.models,
        )
        materialize_repository([deployed], self.work_dir / "models")
        for worker in self.workers:  # a second call after a partial failure loads the rest
            worker.server.load_model(version.triton_model_name)
            if all(v.version_id != version.version_id for _, v in worker.versions):
                worker.versions.append((settings, version))
        self.deployments.append((settings, version))

    def unload_everywhere(self, version_id: str) -> None:
        """Unloads a version from every worker (blocking); not reloaded when a worker restarts."""
        self.deployments = [(m, v) for m, v in self.deployments if v.version_id != version_id]
        name = version_id.replace("@", "--", 1)  # frontend/catalog/registry.py triton_model_name
        for worker in self.workers:
            worker.versions = [(m, v) for m, v in worker.versions if v.version_id != version_id]
            if worker.server.repository_index().get(name) in ("LOADING", "READY", "UNLOADING"):
                worker.server.unload_model(name)  # also after a failed try: waits until it is unloaded

    def handles(self, inactivity_timeout_s: float | None) -> list[WorkerHandle]:
        """A pool entry per worker, with a client to its server."""
        return [
            WorkerHandle(
                worker_id=w.worker_id,
                address=w.advertised,
                client=TritonWorker(
                    w.server.grpc_url,
                    inactivity_timeout_s=inactivity_timeout_s,
                    headers=w.server.grpc_headers,
                ),
                capacity={v.version_id: kv_blocks(m) for m, v in w.versions},
                last_heartbeat=datetime.now(UTC).timestamp(),
            )
            for w in self.workers
        ]

    def stop(self) -> None:
        for worker in self.workers:
            worker.server.stop()
        self.workers = []


def stored_versions(store: Store, skip: set[str], fetch: Fetch | None = None) -> list[ServedVersion]:
    """The READY versions in the store but those in `skip`, verified. With `fetch` ([fleet]
    repository_target), each is taken from this host's repository, downloaded there first if absent
    (the recorded path is the pushing frontend's); without, from the recorded path. One whose
    artifact is missing or fails verification is logged and left out."""
    found = []
    for version_id, path in served_versions(store):
        if version_id in skip:
            continue
        try:
            if fetch is not None:
                path = fetch(version_id)
            found.append(load_version(path))
        except (ArtifactIntegrityError, OSError, KeyError, ValueError) as e:
            log.error("version %s: artifact %s failed verification (%s); not served", version_id, path, e)
    return found
