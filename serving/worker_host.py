"""`python -m serving worker`: a worker host of the fleet. It starts and supervises this host's
`tritonserver` processes as `make serve` does (serving/worker_set.py, serving/supervisor.py), loads
the versions assigned to it (its config's `[[models]]`, and every version READY in the store), and
registers each worker in the store: its advertised address, loaded versions and their KV pools,
health, and a lease that every heartbeat extends. No frontend is its parent: frontends find it in
the registry (frontend/fleet/worker_directory.py).

While it runs, its versions follow the store (serving/version_sync.py): one pushed or registered
anywhere is loaded, one retired is unloaded once its last generation ended. With [fleet]
repository_target, each artifact comes from this host's [repository] path, fetched there first
from that frontend (Admin.FetchArtifactFile with worker_key; serving/artifact_fetch.py) and
verified before it is loaded; without, from the path the store records.

Triton's restricted protocols need [fleet] worker_key, the access key the frontends hold too. A
clean exit (SIGTERM) ends the registrations first, so frontends stop routing here, then stops the
servers; a host killed outright stops heartbeating and is dropped once its lease expires.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

from config.loader import require_fleet_keys
from config.settings import PlatformConfig
from control.workers import prune_workers
from datastore.store import Store, open_store
from frontend.catalog.cache import store_url
from frontend.dispatch.worker_pool import WorkerPool
from serving.artifact_fetch import repository_fetch
from serving.supervisor import Supervisor
from serving.version_sync import ArtifactSource, HostVersions
from serving.worker_set import LocalWorkers
from serving.workers import PREFIX_SUMMARY_DIR, LocalWorker

ROOT = Path(__file__).resolve().parent.parent
PRUNE_AFTER = timedelta(days=1)  # registrations expired this long ago are deleted at start-up
log = logging.getLogger(__name__)


class WorkerHost:
    def __init__(self, cfg: PlatformConfig, work_dir: Path | None = None) -> None:
        require_fleet_keys(cfg, "worker_key")
        self.cfg = cfg
        work = Path(cfg.triton.work_dir) if work_dir is None else work_dir
        self.fetch = repository_fetch(cfg)
        work = work if work.is_absolute() else ROOT / work
        self.local = LocalWorkers(cfg, work, cfg.fleet.worker_key, self.fetch)
        self.store: Store | None = None

    @property
    def workers(self) -> list[LocalWorker]:
        return self.local.workers

    def start(self) -> None:
        """Opens the store (migrating it), starts the workers and loads their versions (blocking)."""
        self.store = open_store(store_url(self.cfg.store.url), timeout_s=self.cfg.store.timeout_s)
        try:
            with self.store.transaction() as session:
                prune_workers(session, expired_before=datetime.now(UTC) - PRUNE_AFTER)
            self.local.start(self.store, self.local.configured())
        except Exception:
            self.stop()
            raise

    async def serve(self, stop: asyncio.Event) -> None:
        """Registers the workers and keeps them running and registered until `stop` is set, then
        ends their registrations."""
        assert self.store is not None, "start() first"
        f, fleet = self.cfg.frontend, self.cfg.fleet
        pool = WorkerPool()
        for handle in self.local.handles(f.worker_inactivity_timeout_s):  # the probes' canaries
            pool.add(handle)
        for model, version in self.local.deployments:
            pool.block_size[version.version_id] = model.block_size
        supervisor = Supervisor(
            self.workers,
            pool,
            self.store,
            probe_interval_s=f.worker_probe_interval_s,
            inactivity_timeout_s=f.worker_inactivity_timeout_s,
            heartbeat_s=fleet.worker_lease_s / 4,
            lease_s=fleet.worker_lease_s,
            summary_dir=PREFIX_SUMMARY_DIR if self.cfg.routing.summary_blocks else None,
        )
        await asyncio.to_thread(supervisor.heartbeat)
        supervisor.start()
        versions = HostVersions(
            self.store,
            self.local,
            pool,
            ArtifactSource(self.fetch),
            lambda: asyncio.to_thread(supervisor.heartbeat),
            f.catalog_refresh_s,
        )
        versions.start()
        try:
            await stop.wait()
        finally:
            await versions.close()
            await supervisor.close()
            try:
                await asyncio.to_thread(supervisor.retire)
            except Exception:  # their leases then run out on their own
                log.exception("could not retire the workers' registrations")
            else:  # frontends see it at their next registry refresh, before the servers stop
                await asyncio.sleep(2 * fleet.registry_refresh_s)
            for handle in pool.workers.values():
                await handle.client.close()

    def stop(self) -> None:
        self.local.stop()
        if self.store is not None:
            self.store.close()
            self.store = None
