"""A worker's Python-backend stub killed (SIGKILL) while the worker sits idle: the next request gets
UNAVAILABLE with a RetryInfo and a message naming no internal process, never INTERNAL; its request id
is not burnt (the same request runs once the worker is back); health turns NOT_SERVING as soon as the
stub is gone, with no request needed to find out.

The probe interval is an hour here, so no canary or readiness check notices the death: what does is
the answer Triton gives the request (the first test runs a frontend with no supervisor at all, so
that answer is what the client's request meets), and the supervisor's watch over the stubs (the
second)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2

from billing.aggregator import UsageAggregator
from config.settings import PlatformConfig
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.worker_pool import WorkerPool
from frontend.generations.manager import GenerationManager
from frontend.rpc.server import frontend_server
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import auth, platform_config
from tests.e2e.test_admission import status_detail
from tests.e2e.test_errors import expect_error
from tests.e2e.test_worker_liveness import HealthLog, stub_pids, until
from tests.e2e.test_worker_loss import keys

Reason = pb.Finished.Reason
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
HOUR_S = 3600.0


def quiet_probes(store: Path) -> PlatformConfig:
    """No canary and no readiness check for an hour: only a stub's exit can tell the worker died."""
    cfg = platform_config(store)
    frontend = replace(cfg.frontend, worker_probe_interval_s=HOUR_S, worker_inactivity_timeout_s=2 * HOUR_S)
    return replace(cfg, frontend=frontend)


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    """A platform of this module's own (its stubs are killed here), workers started, no frontend."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as tests/e2e/conftest.py says why
    work = tmp_path_factory.mktemp("stub-death")
    platform = Platform(quiet_probes(work / "control.sqlite"), work_dir=work / "triton")
    platform.start_workers()
    yield platform
    platform.stop_workers()


def kill_stub(platform: Platform) -> int:
    """SIGKILLs the worker's one stub; returns once it is no longer a live process."""
    assert platform.triton is not None and platform.triton.process is not None
    server_pid = platform.triton.process.pid
    (stub_pid,) = stub_pids(server_pid)
    os.kill(stub_pid, signal.SIGKILL)
    return stub_pid


async def stub_gone(platform: Platform, stub_pid: int) -> None:
    assert platform.triton is not None and platform.triton.process is not None
    server_pid = platform.triton.process.pid
    await until(lambda: stub_pid not in stub_pids(server_pid), "the killed stub still runs")


def expect_retryable(error: grpc.aio.AioRpcError) -> None:
    """UNAVAILABLE with a retry delay, and nothing internal in what the client reads."""
    assert error.code() == grpc.StatusCode.UNAVAILABLE, (error.code(), error.details())
    assert status_detail(error, error_details_pb2.RetryInfo).retry_delay.ToTimedelta().total_seconds() > 0
    details = (error.details() or "").lower()
    assert "stub" not in details and "triton" not in details and "python" not in details


@pytest_asyncio.fixture(loop_scope="session")
async def bare_frontend(own: Platform) -> AsyncIterator[grpc.aio.Channel]:
    """A frontend over the own platform's worker with no supervisor: nothing but the request itself
    meets the dead stub."""
    assert own.store is not None
    pool = WorkerPool()
    for handle in own.local.handles(inactivity_timeout_s=None):
        pool.add(handle)
    aggregator = UsageAggregator(own.store.sessions, clock=lambda: datetime.now(UTC))
    aggregator.start()
    manager = GenerationManager(own.store, aggregator, Dispatcher(pool))
    try:
        async with (
            frontend_server("127.0.0.1:0", keys(own), own.registry, manager) as (_, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            yield channel
    finally:
        await aggregator.close()
        for handle in pool.workers.values():
            await handle.client.close()


async def test_a_request_meeting_a_dead_stub_is_unavailable_and_its_request_id_runs_on_the_retry(
    own: Platform, bare_frontend: grpc.aio.Channel
) -> None:
    stub = generations_pb2_grpc.GenerationsStub(bare_frontend)
    req = pb.GenerateRequest(request_id="stub-died-1", model="smollm2-135m", prompt="Hi", max_output_tokens=3)
    events = [e async for e in stub.Generate(req, metadata=auth(), timeout=120)]  # the worker serves
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT

    await stub_gone(own, kill_stub(own))
    req.request_id = "stub-died-2"
    error = await expect_error(
        lambda: stub.Generate(req, metadata=auth(), timeout=120),
        grpc.StatusCode.UNAVAILABLE,
        "WORKER_UNAVAILABLE",  # Triton answered "stub process ... is not healthy"
    )
    expect_retryable(error)
    await expect_error(  # withdrawn: no record of it is left to replay the refusal
        lambda: stub.GetGeneration(pb.GetGenerationRequest(request_id="stub-died-2"), metadata=auth()),
        grpc.StatusCode.NOT_FOUND,
        "GENERATION_NOT_FOUND",
    )

    # the worker comes back (here restarted by hand: this frontend has no supervisor)
    worker = own.workers[0]
    await asyncio.to_thread(worker.server.stop, kill=True)
    await asyncio.to_thread(worker.server.start)
    await asyncio.to_thread(worker.load)
    events = [e async for e in stub.Generate(req, metadata=auth(), timeout=120)]  # the same request id
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    got = await stub.GetGeneration(pb.GetGenerationRequest(request_id="stub-died-2"), metadata=auth())
    assert got.state == pb.Generation.State.COMPLETED and got.epoch == 1


async def test_health_turns_not_serving_as_soon_as_the_stub_is_gone_and_a_retry_runs_once_it_is_back(
    own: Platform,
) -> None:
    async with (
        own.frontend("127.0.0.1:0") as (_, port),
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
    ):
        health = HealthLog(channel)
        try:
            await until(lambda: health.statuses[-1:] == [SERVING], "the platform never reported SERVING")
            assert own.triton is not None and own.triton.process is not None
            server_pid = own.triton.process.pid
            await stub_gone(own, kill_stub(own))
            stub = generations_pb2_grpc.GenerationsStub(channel)
            req = pb.GenerateRequest(
                request_id="stub-died-3", model="smollm2-135m", prompt="Hi", max_output_tokens=3
            )
            try:  # the supervisor may already have restarted the worker: then it simply runs
                events = [e async for e in stub.Generate(req, metadata=auth(), timeout=120)]
                assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
            except grpc.aio.AioRpcError as e:
                expect_retryable(e)  # WORKER_UNAVAILABLE (Triton's answer) or NO_WORKER (found dead)

            # no canary or readiness probe for an hour: the stub's exit alone turned health
            await until(lambda: NOT_SERVING in health.statuses, "health never turned NOT_SERVING")
            await until(lambda: health.statuses[-1] == SERVING, "health never came back to SERVING")
            assert own.triton.process is not None and own.triton.process.pid != server_pid
            events = [e async for e in stub.Generate(req, metadata=auth(), timeout=120)]
            assert events[-1].finished.reason == Reason.OUTPUT_LIMIT  # its id was never burnt
        finally:
            await health.close()
