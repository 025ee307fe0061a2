"""Admin's roll-out use cases over the store (control/rollout.py), then this frontend's caches:
route changes with their record, promote, roll back, retire, and the record itself.

Retirement: `retire()` moves the version to DRAINING (refused while routed), so neither this
frontend (its registry's statuses) nor another (at its next catalog refresh) pins it again. A
background task then waits, polling the store every `poll_s`, until no generation pinned to it is
queued or running on any frontend, has the workers unload it (`undeploy`), records it RETIRED and,
when asked, deletes its files from the repository. A frontend that restarts finishes the
retirements it finds DRAINING (their files are kept then).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from control.errors import ModelVersionConflict, VersionNotServable
from control.model_versions import VersionSpec, register_version, versions_with_status
from control.models import ModelVersion, ModelVersionStatus
from control.rollout import (
    Change,
    Route,
    active_generations,
    begin_retire,
    canary,
    change_route,
    finish_retire,
    list_changes,
    promote,
    record_change,
    rollback,
)
from datastore.locks import exclusive
from datastore.store import Store
from frontend.catalog.cache import CATALOG_WRITES
from frontend.catalog.registry import ModelRegistry

Undeploy = Callable[[str], Awaitable[None]]  # unloads a version (by id) from the workers
log = logging.getLogger(__name__)
V = ModelVersionStatus


@dataclass(slots=True, eq=False)
class Rollout:
    store: Store
    registry: ModelRegistry
    repository: Path  # files are deleted only inside it
    undeploy: Undeploy
    poll_s: float = 1.0
    _tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    # --- blocking store work (run with asyncio.to_thread) ----------------------------------------

    def check_push(self, spec: VersionSpec) -> None:
        """`ModelVersionConflict` when the store holds the version id with other content,
        `VersionNotServable` when it is retiring or retired."""
        with self.store.transaction() as s:
            existing = s.get(ModelVersion, spec.version_id)
            if existing is None:
                return
            if not spec.same_content(existing):
                raise ModelVersionConflict(spec.version_id)
            if existing.status in (V.DRAINING, V.RETIRED):
                raise VersionNotServable(spec.version_id, str(existing.status))

    def record_push(self, spec: VersionSpec, actor: str) -> None:
        with self.store.transaction() as s:
            exclusive(s, CATALOG_WRITES)
            now = datetime.now(UTC)
            register_version(s, spec, now=now)
            record_change(s, actor=actor, action="PUSH", now=now, version_id=spec.version_id)

    def set_route(self, alias: str, weights: Route, actor: str) -> Route:
        return self._route(lambda s, now: change_route(s, alias, weights, actor=actor, now=now), alias)

    def canary(self, alias: str, version_id: str, percent: int, actor: str) -> Route:
        return self._route(lambda s, now: canary(s, alias, version_id, percent, actor=actor, now=now), alias)

    def promote(self, alias: str, version_id: str, actor: str) -> Route:
        return self._route(lambda s, now: promote(s, alias, version_id, actor=actor, now=now), alias)

    def rollback(self, alias: str, actor: str) -> Route:
        return self._route(lambda s, now: rollback(s, alias, actor=actor, now=now), alias)

    def _route(self, change: Callable[..., Route], alias: str) -> Route:
        with self.store.transaction() as s:
            exclusive(s, CATALOG_WRITES)
            route = change(s, datetime.now(UTC))
        self.registry.set_route(alias, route)
        return route

    def changes(self, limit: int) -> list[Change]:
        with self.store.transaction() as s:
            return list_changes(s, limit)

    # --- retirement -------------------------------------------------------------------------

    async def retire(self, version_id: str, delete_files: bool, actor: str) -> ModelVersionStatus:
        """DRAINING now (RETIRED once its generations ended and the workers unloaded it)."""
        status = await asyncio.to_thread(self._begin, version_id, actor)
        self.registry.set_status(version_id, str(status))
        if status is V.DRAINING:
            self._follow(version_id, delete_files, actor)
        return status

    def start(self) -> None:
        """Finishes the retirements a previous run left DRAINING."""
        with self.store.transaction() as s:
            draining = [v.id for v in versions_with_status(s, V.DRAINING)]
        for version_id in draining:
            self._follow(version_id, False, "restart")

    async def wait_retired(self, version_id: str) -> None:
        """Until the retirement of `version_id` running here has ended (tests)."""
        task = self._tasks.get(version_id)
        if task is not None:
            await asyncio.shield(task)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()

    def _follow(self, version_id: str, delete_files: bool, actor: str) -> None:
        if version_id not in self._tasks or self._tasks[version_id].done():
            coro = self._complete(version_id, delete_files, actor)
            self._tasks[version_id] = asyncio.create_task(coro, name=f"retire-{version_id}")

    def _begin(self, version_id: str, actor: str) -> ModelVersionStatus:
        with self.store.transaction() as s:
            exclusive(s, CATALOG_WRITES)
            return begin_retire(s, version_id, actor=actor, now=datetime.now(UTC)).status

    async def _complete(self, version_id: str, delete_files: bool, actor: str) -> None:
        while await asyncio.to_thread(self._active, version_id):
            await asyncio.sleep(self.poll_s)
        while True:
            try:
                await self.undeploy(version_id)
                break
            except Exception:  # a worker still unloading it, or unreachable: ask again
                log.exception("unloading %s failed; trying again", version_id)
                await asyncio.sleep(self.poll_s)
        uri = await asyncio.to_thread(self._finish, version_id, actor)
        self.registry.set_status(version_id, str(V.RETIRED))
        folder, repository = Path(uri).resolve(), self.repository.resolve()
        if delete_files and folder.is_relative_to(repository) and folder != repository:
            await asyncio.to_thread(shutil.rmtree, folder, True)
        log.info("version %s retired (files %s)", version_id, "deleted" if delete_files else "kept")

    def _active(self, version_id: str) -> int:
        with self.store.transaction() as s:
            return active_generations(s, version_id)

    def _finish(self, version_id: str, actor: str) -> str:
        with self.store.transaction() as s:
            exclusive(s, CATALOG_WRITES)
            return finish_retire(s, version_id, actor=actor, now=datetime.now(UTC)).artifact_uri
