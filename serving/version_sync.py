"""A fleet role's model versions kept equal to the store's: the worker hosts' and the other
frontends' half of Admin's PushModelVersion, RegisterModelVersion and RetireVersion in the fleet
(the one-process platform loads and unloads on its own workers directly, serving/platform.py).

Rule, applied every `refresh_s` (the version rows are read each time: a retirement waits for
generations to end, and their ends move no catalog revision):
- A worker host (`HostVersions`) loads every version REGISTERED or READY that it does not serve:
  the artifact is verified, loaded on each of its workers, advertised in their registrations, and
  the version recorded READY. It unloads a version it serves that is RETIRED, or DRAINING with no
  generation queued or running on any frontend (admission refuses new ones for a DRAINING version,
  lifecycle/admission.py, so that count stays at zero), and then stops advertising it.
- A fleet frontend (`FrontendVersions`) adds every READY version its registry lacks (its tokenizer
  and template), so it serves requests for it.
Where the artifact comes from (`ArtifactSource`): with [fleet] repository_target, from this host's
[repository] path, fetched there first from that frontend if absent (the path the store records
names a folder on the pushing frontend's machine); without one, from the recorded path itself (a
shared filesystem). An artifact that fails verification is logged and not tried again by this
process; any other failure (the frontend unreachable, a worker restarting) is tried again at the
next refresh, `MAX_TRIES` times in all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from artifacts.manifest import ArtifactIntegrityError
from control.model_versions import set_version_status, versions_with_status
from control.models import ModelVersion, ModelVersionStatus
from control.rollout import active_generations
from datastore.locks import exclusive
from datastore.store import Store
from frontend.background import Background, every
from frontend.catalog.cache import CATALOG_WRITES
from frontend.catalog.registry import ModelRegistry, ServedVersion, load_version
from frontend.dispatch.worker_pool import WorkerPool
from serving.artifact_fetch import Fetch
from serving.worker_set import LocalWorkers
from serving.workers import kv_blocks

V = ModelVersionStatus
MAX_TRIES = 5  # loads of one version that failed for a reason other than its artifact
log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class ArtifactSource:
    fetch: Fetch | None = None  # [fleet] repository_target's download into this host's repository

    def folder(self, version_id: str, recorded: Path) -> Path:
        """The version's artifact folder on this host (blocking: may download)."""
        return recorded if self.fetch is None else self.fetch(version_id)

    def load(self, version_id: str, recorded: Path) -> ServedVersion:
        """The verified version (blocking); ArtifactIntegrityError when it is another one."""
        version = load_version(self.folder(version_id, recorded))
        if version.version_id != version_id:
            raise ArtifactIntegrityError(f"the artifact for {version_id} holds {version.version_id}")
        return version


@dataclass(slots=True, eq=False)
class _Attempts:
    """Which versions this process stopped trying, and how often each failed."""

    failed: dict[str, int] = field(default_factory=dict)

    def wanted(self, version_id: str) -> bool:
        return self.failed.get(version_id, 0) < MAX_TRIES

    def give_up(self, version_id: str, why: Exception) -> None:
        self.failed[version_id] = MAX_TRIES
        log.error("version %s: artifact refused (%s); not loaded by this process", version_id, why)

    def failed_once(self, version_id: str, why: Exception) -> None:
        tries = self.failed[version_id] = self.failed.get(version_id, 0) + 1
        log.warning("version %s: loading failed (%s); try %d of %d", version_id, why, tries, MAX_TRIES)

    async def load(self, source: ArtifactSource, version_id: str, recorded: Path) -> ServedVersion | None:
        """The verified version, or None after recording why not (given up, or one more try)."""
        try:
            return await asyncio.to_thread(source.load, version_id, recorded)
        except (ArtifactIntegrityError, KeyError, ValueError) as e:
            self.give_up(version_id, e)
        except Exception as e:  # OSError: the repository frontend unreachable, for one
            self.failed_once(version_id, e)
        return None


@dataclass(slots=True, frozen=True)
class _Row:
    status: ModelVersionStatus
    uri: Path
    active: int  # generations not ended (counted only for a DRAINING version served here)


@dataclass(slots=True, eq=False)
class HostVersions:
    store: Store
    local: LocalWorkers
    pool: WorkerPool  # the host's own handles: their capacity is what the registrations advertise
    source: ArtifactSource
    announce: Callable[[], Awaitable[None]]  # writes the registrations now (the supervisor's heartbeat)
    refresh_s: float
    _attempts: _Attempts = field(default_factory=_Attempts)
    _background: Background = field(init=False)

    def __post_init__(self) -> None:
        self._background = every("host-versions", self.refresh_s, self.sync, log)

    def served(self) -> set[str]:
        """The versions deployed here, and those still advertised: unload_everywhere drops a version
        from the deployments before it unloads it, and its capacity goes only once that succeeded,
        so a failed unload is asked again on the next pass."""
        advertised = {v for handle in self.pool.workers.values() for v in handle.capacity}
        return {v.version_id for _, v in self.local.deployments} | advertised

    async def sync(self) -> None:
        """One pass of the rule: loads what the store added, unloads what it retired."""
        served = self.served()
        rows = await asyncio.to_thread(self._read, served)
        for version_id, row in sorted(rows.items()):
            wanted = row.status in (V.REGISTERED, V.READY) and self._attempts.wanted(version_id)
            if wanted and version_id not in served:
                await self._load(version_id, row.uri)
        for version_id in sorted(served):
            held = rows.get(version_id)
            if held is None or held.status is V.RETIRED or (held.status is V.DRAINING and held.active == 0):
                await self._unload(version_id)

    def _read(self, served: set[str]) -> dict[str, _Row]:
        with self.store.transaction() as s:
            versions = versions_with_status(s, *V)
            return {
                v.id: _Row(
                    v.status,
                    Path(v.artifact_uri),
                    active_generations(s, v.id) if v.status is V.DRAINING and v.id in served else 0,
                )
                for v in versions
            }

    async def _load(self, version_id: str, recorded: Path) -> None:
        version = await self._attempts.load(self.source, version_id, recorded)
        if version is None:
            return
        settings = self.local.settings_for(version)
        try:
            await asyncio.to_thread(self.local.load_everywhere, settings, version)
        except Exception as e:  # a worker restarting, or Triton refusing the model
            self._attempts.failed_once(version_id, e)
            return
        self.pool.block_size[version_id] = settings.block_size
        for handle in self.pool.workers.values():  # a new dict: the heartbeat may be reading the old
            handle.capacity = {**handle.capacity, version_id: kv_blocks(settings)}
        await self.announce()
        await asyncio.to_thread(self._record_ready, version_id)
        log.info("version %s loaded on %d worker(s)", version_id, len(self.local.workers))

    def _record_ready(self, version_id: str) -> None:
        with self.store.transaction() as s:
            exclusive(s, CATALOG_WRITES)
            row = s.get(ModelVersion, version_id)
            if row is not None and row.status is V.REGISTERED:
                set_version_status(s, version_id, V.READY, now=datetime.now(UTC))

    async def _unload(self, version_id: str) -> None:
        try:
            await asyncio.to_thread(self.local.unload_everywhere, version_id)
        except Exception:  # a worker restarting: the next refresh asks again
            log.exception("unloading %s failed; trying again", version_id)
            return
        for handle in self.pool.workers.values():
            handle.capacity = {v: blocks for v, blocks in handle.capacity.items() if v != version_id}
        self.pool.block_size.pop(version_id, None)
        await self.announce()
        log.info("version %s unloaded from %d worker(s)", version_id, len(self.local.workers))

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()


@dataclass(slots=True, eq=False)
class FrontendVersions:
    store: Store
    registry: ModelRegistry  # its statuses follow the catalog (frontend/catalog/cache.py)
    source: ArtifactSource
    refresh_s: float
    _attempts: _Attempts = field(default_factory=_Attempts)
    _background: Background = field(init=False)

    def __post_init__(self) -> None:
        self._background = every("frontend-versions", self.refresh_s, self.sync, log)

    def missing(self) -> set[str]:
        """READY versions (as the catalog last read them) that the registry lacks."""
        ready = {v for v, status in self.registry.statuses.items() if status == V.READY}
        return {v for v in ready - self.registry.versions.keys() if self._attempts.wanted(v)}

    async def sync(self) -> None:
        if not self.missing():
            return
        recorded = await asyncio.to_thread(self._recorded)
        for version_id in sorted(self.missing()):
            if version_id not in recorded:
                continue
            version = await self._attempts.load(self.source, version_id, recorded[version_id])
            if version is None:
                continue
            self.registry.add_version(version)
            log.info("version %s added to this frontend's registry", version_id)

    def _recorded(self) -> dict[str, Path]:
        with self.store.transaction() as s:
            return {v.id: Path(v.artifact_uri) for v in versions_with_status(s, V.READY)}

    def start(self) -> None:
        self._background.start()

    async def close(self) -> None:
        await self._background.close()
