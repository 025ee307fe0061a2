"""The fleet for the tests of this package: PostgreSQL (a fresh schema), two worker hosts and two
frontends, each its own process tree, started once for the package (tests/e2e/fleet/harness.py).
A test that kills a role leaves the fleet to `whole_fleet`, which restarts what is missing before
the next test, so the tests need no particular order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from datastore.store import Store, open_store
from tests.datastore.stores import POSTGRES_URL, postgres_schema
from tests.e2e.conftest import KEY_ALPHA, KEY_BETA, KEY_DELTA, KEY_GAMMA
from tests.e2e.fleet.harness import ADMIN_KEY, FRONTEND_KEY, WORKER_KEY, Fleet

MODEL = "smollm2-135m"
KEY_ROLL = "key-roll"
KV_BLOCKS = 40  # per worker: two requests of 21+ blocks never fit one worker together


def fleet_config(store_url: str) -> dict[str, Any]:
    return {
        "frontend": {
            "admin_api_keys": [ADMIN_KEY],
            "disconnect_grace_s": 15.0,  # a client reconnecting through the other frontend is back in time
            "interactive_queue_wait_s": 60.0,
            "attempt_lease_s": 6.0,  # a killed frontend's generations are swept within seconds
            "catalog_refresh_s": 0.5,
            "stream_max_events": 512,
            "slow_consumer_timeout_s": 600.0,  # a run paused for an unhurried test's reader waits
        },
        "http": {"listen": ""},
        "store": {"url": store_url},
        "fleet": {
            "frontend_key": FRONTEND_KEY,
            "worker_key": WORKER_KEY,
            "frontend_lease_s": 6.0,
            "worker_lease_s": 6.0,
            "registry_refresh_s": 0.5,
            "drain_timeout_s": 120.0,
        },
        "tenants": [
            {"id": "alpha", "api_keys": [KEY_ALPHA]},
            {"id": "beta", "api_keys": [KEY_BETA]},
            {"id": "gamma", "api_keys": [KEY_GAMMA], "max_concurrent_generations": 2},
            {"id": "delta", "api_keys": [KEY_DELTA], "output_tokens_per_minute": 100},
            {"id": "roll", "api_keys": [KEY_ROLL]},  # the rolling restart's load
        ],
        "models": [{"alias": MODEL, "kv_cache_blocks": KV_BLOCKS, "max_num_batched_tokens": 128}],
    }


@pytest.fixture(scope="package")
def fleet_schema() -> Iterator[str]:
    with postgres_schema() as schema:
        yield schema


@pytest.fixture(scope="package")
def fleet(tmp_path_factory: pytest.TempPathFactory, artifact_dir: Path, fleet_schema: str) -> Iterator[Fleet]:
    url = f"{POSTGRES_URL}?options=-csearch_path%3D{fleet_schema}"
    fleet = Fleet(fleet_config(url), tmp_path_factory.mktemp("fleet"))
    try:
        fleet.whole()
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def whole_fleet(fleet: Fleet) -> Fleet:
    """The fleet with every role running and ready (restarting any an earlier test killed)."""
    fleet.whole()
    return fleet


@pytest.fixture(scope="package")
def fleet_store(fleet_schema: str) -> Iterator[Store]:
    """The fleet's store, as the tests read it."""
    store = open_store(POSTGRES_URL, search_path=fleet_schema)
    yield store
    store.close()


@pytest_asyncio.fixture(loop_scope="session")
async def channels(whole_fleet: Fleet) -> AsyncIterator[tuple[grpc.aio.Channel, grpc.aio.Channel]]:
    """A channel to each frontend (f1, f2)."""
    f1, f2 = whole_fleet.frontends
    async with grpc.aio.insecure_channel(f1.address) as a, grpc.aio.insecure_channel(f2.address) as b:
        yield a, b
