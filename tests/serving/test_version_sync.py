"""The fleet's version sync (serving/version_sync.py) over a real SQLite store and real, verified
tiny artifacts, with the Triton side of a worker host stood in for: which versions a host loads
and unloads, what it advertises and records, and which failures it tries again. The real worker
hosts run it in tests/e2e/fleet/test_fleet_push.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.settings import ModelSettings, PlatformConfig
from control.model_versions import register_version
from control.models import ModelVersion, ModelVersionStatus
from control.rollout import begin_retire, finish_retire
from control.states import GenerationState
from datastore.store import Store, open_store
from frontend.catalog.cache import version_spec
from frontend.catalog.registry import ModelRegistry, ServedVersion, load_version
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from lifecycle.admission import admit
from lifecycle.termination import finish_queued
from serving.triton_host import TritonError
from serving.version_sync import MAX_TRIES, ArtifactSource, FrontendVersions, HostVersions
from serving.worker_set import LocalWorkers
from tests.builders import T0, add_tenant, new_generation

V = ModelVersionStatus
NOW = datetime.now(UTC)


class TritonLess(LocalWorkers):
    """LocalWorkers whose load and unload record the call instead of asking a Triton server."""

    def __init__(self, tmp: Path) -> None:
        super().__init__(PlatformConfig(), tmp)
        self.calls: list[tuple[str, str]] = []
        self.fail_unloads = 0

    def load_everywhere(self, settings: ModelSettings, version: ServedVersion) -> None:
        self.calls.append(("load", version.version_id))
        self.deployments.append((settings, version))

    def unload_everywhere(self, version_id: str) -> None:
        self.calls.append(("unload", version_id))
        self.deployments = [(m, v) for m, v in self.deployments if v.version_id != version_id]
        if self.fail_unloads:  # as the real one does when a worker restarts meanwhile: dropped first
            self.fail_unloads -= 1
            raise TritonError("failed to connect to all addresses")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'c.sqlite'}")
    yield s
    s.close()


def record(store: Store, version: ServedVersion, status: ModelVersionStatus = V.REGISTERED) -> None:
    with store.transaction() as s:
        register_version(s, version_spec(version), now=NOW)
        if status is not V.REGISTERED:
            s.get_one(ModelVersion, version.version_id).status = status


def status_of(store: Store, version_id: str) -> ModelVersionStatus:
    with store.transaction() as s:
        return s.get_one(ModelVersion, version_id).status


class Host:
    """A HostVersions over a TritonLess host with one worker handle, counting announcements."""

    def __init__(self, store: Store, tmp: Path, source: ArtifactSource) -> None:
        self.local = TritonLess(tmp)
        self.pool = WorkerPool()
        self.pool.add(WorkerHandle(worker_id="w-0", address="", client=None))  # type: ignore[arg-type]
        self.announced = 0
        self.sync = HostVersions(store, self.local, self.pool, source, self._announce, refresh_s=1.0)

    async def _announce(self) -> None:
        self.announced += 1

    @property
    def advertised(self) -> set[str]:
        return set(self.pool.workers["w-0"].capacity)


async def test_a_recorded_version_is_loaded_advertised_and_recorded_ready(
    store: Store, tiny: Path, tmp_path: Path
) -> None:
    version = load_version(tiny)
    record(store, version)
    host = Host(store, tmp_path, ArtifactSource())
    await host.sync.sync()
    assert host.local.calls == [("load", version.version_id)]
    assert host.advertised == {version.version_id} and host.announced == 1
    assert status_of(store, version.version_id) is V.READY
    await host.sync.sync()  # served already: nothing more
    assert host.local.calls == [("load", version.version_id)]


async def test_a_draining_version_stays_until_its_last_generation_ends_then_is_unloaded(
    store: Store, tiny: Path, tmp_path: Path
) -> None:
    version = load_version(tiny)
    record(store, version, V.READY)
    with store.transaction() as s:
        add_tenant(s)
    held = new_generation("r1", model_version_id=version.version_id)
    admit(store, held, now=T0)  # QUEUED: not ended
    host = Host(store, tmp_path, ArtifactSource())
    await host.sync.sync()
    with store.transaction() as s:
        begin_retire(s, version.version_id, actor="test", now=NOW)
    await host.sync.sync()
    assert host.local.calls == [("load", version.version_id)] and host.advertised == {version.version_id}
    finish_queued(store, held.generation_id, state=GenerationState.CANCELED, reason="CANCELLED", now=T0)
    await host.sync.sync()
    assert host.local.calls == [("load", version.version_id), ("unload", version.version_id)]
    assert host.advertised == set() and host.announced == 2
    with store.transaction() as s:
        finish_retire(s, version.version_id, actor="test", now=NOW)
    await host.sync.sync()  # RETIRED: neither loaded again nor unloaded twice
    assert len(host.local.calls) == 2


async def test_a_failed_unload_is_asked_again_on_the_next_pass(
    store: Store, tiny: Path, tmp_path: Path
) -> None:
    version = load_version(tiny)
    record(store, version, V.READY)
    host = Host(store, tmp_path, ArtifactSource())
    await host.sync.sync()
    with store.transaction() as s:
        begin_retire(s, version.version_id, actor="test", now=NOW)  # no generation holds it
    host.local.fail_unloads = 1
    await host.sync.sync()
    assert host.advertised == {version.version_id}  # still loaded somewhere: still advertised
    await host.sync.sync()
    assert host.local.calls == [("load", version.version_id)] + [("unload", version.version_id)] * 2
    assert host.advertised == set()
    await host.sync.sync()  # unloaded: not asked a third time
    assert len(host.local.calls) == 3


async def test_a_fetched_artifact_that_fails_verification_is_never_loaded_nor_fetched_again(
    store: Store, tiny: Path, tmp_path: Path
) -> None:
    version = load_version(tiny)
    record(store, version)
    fetched: list[str] = []

    def tampered(version_id: str) -> Path:
        fetched.append(version_id)
        into = tmp_path / f"fetched-{len(fetched)}"
        shutil.copytree(tiny, into)
        template = (into / "chat_template.jinja").read_bytes()
        (into / "chat_template.jinja").write_bytes(template[:-1] + b"!")
        return into

    host = Host(store, tmp_path, ArtifactSource(tampered))
    for _ in range(3):
        await host.sync.sync()
    assert fetched == [version.version_id] and host.local.calls == [] and host.advertised == set()
    assert status_of(store, version.version_id) is V.REGISTERED


async def test_an_unreachable_repository_is_tried_again_a_bounded_number_of_times(
    store: Store, tiny: Path, tmp_path: Path
) -> None:
    version = load_version(tiny)
    record(store, version)
    tries: list[str] = []

    def unreachable(version_id: str) -> Path:
        tries.append(version_id)
        raise OSError("fetching from 127.0.0.1:1 failed: UNAVAILABLE")

    host = Host(store, tmp_path, ArtifactSource(unreachable))
    for _ in range(MAX_TRIES + 2):
        await host.sync.sync()
    assert len(tries) == MAX_TRIES and host.local.calls == []


async def test_a_frontend_adds_the_ready_versions_its_registry_lacks(store: Store, tiny: Path) -> None:
    version = load_version(tiny)
    record(store, version)
    registry = ModelRegistry()
    versions = FrontendVersions(store, registry, ArtifactSource(), refresh_s=1.0)
    registry.statuses = {version.version_id: "REGISTERED"}  # as the catalog read it
    await versions.sync()
    assert registry.versions == {}  # not servable yet
    registry.statuses = {version.version_id: "READY"}
    with store.transaction() as s:
        s.get_one(ModelVersion, version.version_id).status = V.READY
    await versions.sync()
    assert list(registry.versions) == [version.version_id]
    assert registry.versions[version.version_id].artifact_dir == tiny
