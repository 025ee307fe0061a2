"""The catalog, with the control store as its one authority (issue 11).

    seed_catalog()   at start-up: the config's tenants, model versions and alias routes go into the
                     store. The config changes only what it names: a tenant it lists takes its keys
                     and quotas; an alias it lists gets the config's route only while that route is
                     absent or was written by the config (an Admin route holds across restarts)
    served_versions  what the store says to serve: every READY version (registered by a config or
                     through Admin), loaded again after a restart
    CatalogCache     this frontend's copy: routes, tenants and keys, worker drain flags. Reloaded
                     whenever the store's catalog revision moves (polled every `refresh_s`; a
                     counter rather than LISTEN/NOTIFY works on SQLite too, see control/revision.py).
                     Each poll also records when this frontend last accepted each key (key list's
                     "last used", to within `refresh_s`)

Admin writes commit to the store first, then update the cache (frontend/admin/service.py; route changes,
promotions, rollbacks and retirements through frontend/admin/rollout.py, which records each).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from artifacts.manifest import Manifest
from config.settings import TenantSpec
from control.api_keys import touch_keys
from control.directory import TenantEntry, tenant_directory
from control.model_versions import (
    VersionSpec,
    alias_routes,
    all_routes,
    register_version,
    route_origin,
    set_version_status,
    versions_with_status,
)
from control.models import ModelVersionStatus, RouteOrigin
from control.revision import current_revision
from control.rollout import change_route, version_statuses
from control.tenants import upsert_tenant
from control.workers import draining_workers, set_worker_draining
from datastore.locks import exclusive
from datastore.store import Store
from frontend.auth import ApiKeyStore
from frontend.background import Background, every
from frontend.catalog.registry import ModelRegistry, ServedVersion
from frontend.dispatch.worker_pool import WorkerPool

ROOT = Path(__file__).resolve().parents[2]
SQLITE_PREFIX = "sqlite:///"
CATALOG_WRITES = 0x6C6C6D_63617461  # "llm" "cata": seeding, READY marks and routes, one at a time
log = logging.getLogger(__name__)


def store_url(url: str) -> str:
    """A relative SQLite path is relative to the repository root; its folder is created."""
    if not url.startswith(SQLITE_PREFIX):
        return url
    path = Path(url[len(SQLITE_PREFIX) :])
    if not path.is_absolute():
        path = ROOT / path
    path.parent.mkdir(parents=True, exist_ok=True)
    return SQLITE_PREFIX + str(path)


def version_spec(version: ServedVersion) -> VersionSpec:
    return manifest_spec(version.manifest, version.artifact_dir)


def manifest_spec(m: Manifest, artifact_dir: Path) -> VersionSpec:
    return VersionSpec(
        name=m.name,
        version=m.version,
        weights_sha256=m.files["model.safetensors"],
        tokenizer_sha256=m.files["tokenizer.json"],
        template_sha256=m.files["chat_template.jinja"],
        compatibility_key=m.compatibility_key,
        artifact_uri=str(artifact_dir),
    )


def seed_catalog(
    store: Store,
    tenants: Iterable[TenantSpec],
    routes: Iterable[tuple[str, ServedVersion]],
    *,
    now: datetime,
) -> None:
    """Records the config's tenants, its versions (REGISTERED until a worker loads them) and its
    alias routes, in one transaction. Idempotent, and safe with other frontends seeding at once."""
    with store.transaction() as s:
        exclusive(s, CATALOG_WRITES)
        for tenant in tenants:
            upsert_tenant(s, tenant, now=now)
        for alias, version in routes:
            register_version(s, version_spec(version), now=now)
            origin = route_origin(s, alias)
            if origin is RouteOrigin.ADMIN:
                log.info("alias %s keeps the route set through Admin (not the config's)", alias)
                continue
            if alias_routes(s, alias) != {version.version_id: 100.0}:
                route = {version.version_id: 100.0}
                change_route(s, alias, route, actor="config", now=now, origin=RouteOrigin.CONFIG)


def served_versions(store: Store) -> list[tuple[str, Path]]:
    """(version id, artifact folder) of every READY version in the store."""
    with store.transaction() as s:
        rows = versions_with_status(s, ModelVersionStatus.READY)
        return sorted((v.id, Path(v.artifact_uri)) for v in rows)


def mark_ready(store: Store, versions: Iterable[ServedVersion], *, now: datetime) -> None:
    """Records versions a worker has loaded as READY (registering any not yet known)."""
    with store.transaction() as s:
        exclusive(s, CATALOG_WRITES)
        for version in versions:
            register_version(s, version_spec(version), now=now)
            set_version_status(s, version.version_id, ModelVersionStatus.READY, now=now)


@dataclass(slots=True, frozen=True)
class CatalogSnapshot:
    revision: int
    tenants: tuple[TenantEntry, ...]
    routes: dict[str, dict[str, float]]
    draining: frozenset[str]  # worker ids
    statuses: dict[str, str]  # version id -> REGISTERED, READY, DRAINING or RETIRED


def read_catalog(store: Store) -> CatalogSnapshot:
    with store.transaction() as s:
        return CatalogSnapshot(
            revision=current_revision(s),
            tenants=tuple(tenant_directory(s)),
            routes=all_routes(s),
            draining=draining_workers(s),
            statuses={v: str(status) for v, status in version_statuses(s).items()},
        )


@dataclass(slots=True, eq=False)
class CatalogCache:
    """Keeps the registry's routes, the API keys and the pool's drain flags equal to the store's."""

    store: Store
    registry: ModelRegistry
    keys: ApiKeyStore
    pool: WorkerPool
    refresh_s: float  # how often the revision is polled
    tenant_kv_share: float = 1.0  # [frontend] max_tenant_kv_share, applied with two tenants or more
    revision: int = -1  # of the snapshot applied last
    _background: Background = field(init=False)
    _reading: asyncio.Lock = field(init=False)

    def __post_init__(self) -> None:
        # a refresh that fails keeps the cache as it is: the next one tries again
        self._background = every("catalog-refresh", self.refresh_s, self.refresh, log)
        self._reading = asyncio.Lock()  # one refresh at a time: a newer snapshot is never overwritten

    def apply(self, snapshot: CatalogSnapshot) -> None:
        self.registry.routes = {alias: dict(route) for alias, route in snapshot.routes.items()}
        self.registry.statuses = dict(snapshot.statuses)
        self.keys.replace(snapshot.tenants)
        for worker in self.pool.workers.values():
            worker.draining = worker.worker_id in snapshot.draining
        self.pool.tenant_share = self.tenant_kv_share if len(snapshot.tenants) > 1 else 1.0
        self.revision = snapshot.revision

    async def refresh(self) -> bool:
        """Reloads when the store's revision moved; True when it did.

        A read that an Admin write of this frontend's overlapped may predate its commit, while the
        write's own update of these caches is already in place: the snapshot is dropped then (its
        revision not taken), and the next refresh reads the store again."""
        async with self._reading:
            return await self._refresh()

    async def reload_after_write(self) -> None:
        """A tenancy write of this frontend committed: its caches reload now (a key just created
        works here at once). A refresh whose read began before the commit is dropped, as for
        route writes (`local_writes`)."""
        self.registry.local_writes += 1
        for _ in range(3):  # dropped only when yet another local write overlapped this read
            async with self._reading:
                writes = self.registry.local_writes
                if await self._refresh() or self.registry.local_writes == writes:
                    return

    async def _refresh(self) -> bool:
        writes = self.registry.local_writes
        used = self.keys.drain_used()
        if used:
            try:
                await asyncio.to_thread(self._touch, used)
            except Exception:  # the store is away: these uses are not recorded; later ones will be
                log.warning("could not record when %d API keys were last used", len(used))
        snapshot = await asyncio.to_thread(self._read_if_moved)
        if snapshot is None:
            return False
        if self.registry.local_writes != writes:
            log.info("catalog read at revision %d overlapped a local write; reading again", snapshot.revision)
            return False
        self.apply(snapshot)
        log.info("catalog reloaded at revision %d", snapshot.revision)
        return True

    def _touch(self, used: dict[str, datetime]) -> None:
        with self.store.transaction() as s:
            touch_keys(s, used)

    def _read_if_moved(self) -> CatalogSnapshot | None:
        with self.store.transaction() as s:
            if current_revision(s) == self.revision:
                return None
        return read_catalog(self.store)

    # --- Admin's writes: the store first, then this cache ------------------------------------

    def set_draining(self, worker_id: str, draining: bool) -> bool:
        """Records a worker's drain flag, then applies it here; False for an unknown worker."""
        worker = self.pool.workers.get(worker_id)
        if worker is None:
            return False
        with self.store.transaction() as s:
            if set_worker_draining(s, worker_id, draining, now=datetime.now(UTC)) is None:
                return False
        self.registry.local_writes += 1
        worker.draining = draining
        return True

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()
