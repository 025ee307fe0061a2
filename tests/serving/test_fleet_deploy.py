"""A fleet frontend's half of a push and a retirement (serving/fleet_frontend.py) over a real SQLite
store and a real, verified tiny artifact, with its worker pool standing in for the registrations
its directory reads: a push answers once a host advertises the version and the store says READY,
and UNAVAILABLE NOT_LOADED when none does in [fleet] deploy_timeout_s (still recorded); a
retirement waits until no host advertises it. The real fleet: tests/e2e/fleet/test_fleet_push.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from config.settings import FleetSettings, FrontendSettings, PlatformConfig
from control.models import ModelVersion, ModelVersionStatus
from datastore.store import Store, open_store
from frontend.catalog.registry import load_version
from frontend.dispatch.worker_pool import WorkerHandle
from serving.fleet_frontend import FleetFrontend
from tests.refusals import refused

V = ModelVersionStatus


@pytest.fixture
def frontend(tmp_path: Path) -> Iterator[FleetFrontend]:
    fleet = FleetSettings(frontend_key="f", worker_key="w", registry_refresh_s=0.05, deploy_timeout_s=0.5)
    cfg = replace(PlatformConfig(), frontend=FrontendSettings(), fleet=fleet, tenants=())
    f = FleetFrontend(cfg)
    f.store = open_store(f"sqlite:///{tmp_path / 'c.sqlite'}")
    yield f
    f.close()


def status_of(store: Store | None, version_id: str) -> ModelVersionStatus:
    assert store is not None
    with store.transaction() as s:
        return s.get_one(ModelVersion, version_id).status


def advertise(f: FleetFrontend, version_id: str) -> None:
    """A worker host's registration, as the worker directory applies it to the pool."""
    f.pool.add(WorkerHandle(worker_id="w-0", address="", client=None, capacity={version_id: 64}))  # type: ignore[arg-type]


async def test_a_push_no_worker_host_loads_is_refused_not_loaded_and_stays_recorded(
    frontend: FleetFrontend, tiny: Path
) -> None:
    version = load_version(tiny)
    with refused() as refusal:
        await frontend.deploy_version(version)
    assert (refusal.value.code, refusal.value.reason) == (grpc.StatusCode.UNAVAILABLE, "NOT_LOADED")
    assert status_of(frontend.store, version.version_id) is V.REGISTERED  # a host may load it later
    assert frontend.registry.status(version.version_id) == "REGISTERED"  # counted by no health check


async def test_a_push_answers_once_a_host_advertises_it_and_the_store_says_ready(
    frontend: FleetFrontend, tiny: Path
) -> None:
    version = load_version(tiny)
    frontend.cfg = replace(frontend.cfg, fleet=replace(frontend.cfg.fleet, deploy_timeout_s=600.0))
    deploy = asyncio.create_task(frontend.deploy_version(version))
    while frontend.store is None or not _recorded(frontend.store, version.version_id):
        await asyncio.sleep(0.01)
    advertise(frontend, version.version_id)  # advertised, but not READY yet: it still waits
    await asyncio.sleep(0.2)
    assert not deploy.done()
    with frontend.store.transaction() as s:  # what the host records once it loaded it
        s.get_one(ModelVersion, version.version_id).status = V.READY
    await asyncio.wait_for(deploy, timeout=60)
    assert version.version_id in frontend.registry.versions


async def test_a_retirement_waits_until_no_host_advertises_it(frontend: FleetFrontend) -> None:
    advertise(frontend, "tiny@1")
    with pytest.raises(TimeoutError):
        await frontend.undeploy_version("tiny@1")
    frontend.pool.workers.clear()  # the host unloaded it and stopped advertising it
    await frontend.undeploy_version("tiny@1")


def _recorded(store: Store, version_id: str) -> bool:
    with store.transaction() as s:
        return s.get(ModelVersion, version_id) is not None
