"""Health means servable (issue 53): a frontend started before any worker host, on a fresh store
(its version recorded but not yet READY), answers NOT_SERVING and refuses requests UNAVAILABLE with
RetryInfo at once; it turns SERVING once a worker host has loaded the version, and NOT_SERVING
again when that host is lost (killed: its registration lapses). A fleet of its own (one frontend,
one worker host, a fresh schema), so the start-up order is the test's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from tests.datastore.stores import POSTGRES_URL, postgres_schema
from tests.e2e.fleet.client import generate, read_rest, reason_of, request
from tests.e2e.fleet.conftest import fleet_config
from tests.e2e.fleet.harness import START_S, Role

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def roles(tmp_path: Path, artifact_dir: Path) -> Iterator[tuple[Role, Role]]:
    with postgres_schema() as schema:
        base = fleet_config(f"{POSTGRES_URL}?options=-csearch_path%3D{schema}")
        frontend = Role("frontend", "f1", base, tmp_path)
        frontend.ports = frontend.draw_ports()
        worker = Role("worker", "w1", base, tmp_path, repository_from=frontend)
        try:
            yield frontend, worker
        finally:
            for role in (worker, frontend):
                if role.running:
                    role.terminate()


async def health(channel: grpc.aio.Channel) -> int | None:
    """The frontend's overall status, None while it does not answer yet."""
    try:
        got = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    except grpc.aio.AioRpcError:
        return None
    return got.status


async def until_health(channel: grpc.aio.Channel, wanted: int, *roles: Role) -> None:
    async with asyncio.timeout(START_S):
        while await health(channel) != wanted:
            for role in roles:
                role.check_alive()
            await asyncio.sleep(0.2)


async def refused_at_once(channel: grpc.aio.Channel) -> None:
    """UNAVAILABLE NO_WORKER with a RetryInfo, not a wait in the queue (its allowance is 60 s here)."""
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await read_rest(generate(channel, request(4)))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert reason_of(e.value) in ("NO_WORKER", "WORKER_UNAVAILABLE")  # none listed, or one just lost
    status = rpc_status.from_call(e.value)
    assert status is not None
    assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)


async def test_not_serving_until_a_worker_holds_the_alias_and_again_when_it_is_lost(
    roles: tuple[Role, Role],
) -> None:
    frontend, worker = roles
    frontend.start()
    async with grpc.aio.insecure_channel(frontend.address) as channel:
        async with asyncio.timeout(START_S):  # listening, with its first verdict made
            while await health(channel) is None:
                frontend.check_alive()
                await asyncio.sleep(0.2)
        assert await health(channel) == NOT_SERVING  # no worker host yet
        await refused_at_once(channel)

        worker.start()
        await until_health(channel, SERVING, frontend, worker)
        served = await read_rest(generate(channel, request(4)))
        assert served[-1].finished.usage.output_tokens == 4

        worker.kill()  # the host is lost: no clean retirement, its lease lapses
        await until_health(channel, NOT_SERVING, frontend)
        await refused_at_once(channel)
