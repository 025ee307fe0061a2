"""A worker that is down, or dies mid-stream: the client gets a defined outcome, never a hang."""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import grpc

from billing.aggregator import UsageAggregator
from control.directory import tenant_directory
from frontend.auth import ApiKeyStore
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.worker_client import TritonWorker
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from frontend.generations.manager import GenerationManager
from frontend.rpc.server import frontend_server
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from serving.triton_host import free_port
from tests.e2e.conftest import auth, platform_config
from tests.e2e.test_errors import expect_error

Reason = pb.Finished.Reason


def keys(platform: Platform) -> ApiKeyStore:
    """The session store's tenants and keys (admission checks the key's id in the store)."""
    assert platform.store is not None
    with platform.store.transaction() as session:
        return ApiKeyStore(tenant_directory(session))


async def test_no_live_worker_is_unavailable(platform: Platform) -> None:
    """The frontend's worker address answers nothing: UNAVAILABLE before any event."""
    address = f"127.0.0.1:{free_port()}"
    dead = TritonWorker(address)
    version = platform.registry.resolve("smollm2-135m")
    pool = WorkerPool()
    pool.add(WorkerHandle("dead-0", address, dead, capacity={version.version_id: 100}))
    assert platform.store is not None
    aggregator = UsageAggregator(platform.store.sessions, clock=lambda: datetime.now(UTC))
    aggregator.start()
    manager = GenerationManager(platform.store, aggregator, Dispatcher(pool))
    try:
        async with (
            frontend_server("127.0.0.1:0", keys(platform), platform.registry, manager) as (_, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            stub = generations_pb2_grpc.GenerationsStub(channel)
            req = pb.GenerateRequest(model="smollm2-135m", prompt="Hello", max_output_tokens=4)
            await expect_error(
                lambda: stub.Generate(req, metadata=auth()), grpc.StatusCode.UNAVAILABLE, "WORKER_UNAVAILABLE"
            )
    finally:
        await aggregator.close()
        await dead.close()


async def test_worker_killed_mid_stream_ends_interrupted(tmp_path: Path) -> None:
    """kill -9 of tritonserver mid-generation: `finished` INTERRUPTED with the usage seen so far,
    marked as not final; no silent restart."""
    own = Platform(platform_config(tmp_path / "control.sqlite"), work_dir=tmp_path / "triton")
    await asyncio.to_thread(own.start_workers)
    try:
        async with (
            own.frontend("127.0.0.1:0") as (_, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch,
        ):
            stub = generations_pb2_grpc.GenerationsStub(ch)
            req = pb.GenerateRequest(
                model="smollm2-135m",
                prompt="Count:",
                max_output_tokens=2000,
                sampling=pb.SamplingParams(ignore_eos=True),
            )
            events = []
            killed = False
            async for event in stub.Generate(req, metadata=auth(), timeout=120):
                events.append(event)
                # once only: a usage event may follow the fifth delta, and by then the supervisor
                # may already be restarting the server it saw die
                if not killed and sum(e.HasField("delta") for e in events) == 5:
                    assert own.triton is not None and own.triton.process is not None
                    os.kill(own.triton.process.pid, signal.SIGKILL)
                    killed = True
            finished = events[-1].finished
            delivered = sum(len(e.delta.token_ids) for e in events if e.HasField("delta"))
            assert finished.reason == Reason.INTERRUPTED
            assert not finished.usage_final
            assert finished.usage.output_tokens == delivered >= 5
            assert [e.sequence for e in events] == list(range(1, len(events) + 1))
            got = await stub.GetGeneration(
                pb.GetGenerationRequest(generation_id=events[0].generation_id), metadata=auth()
            )
            # the attempt is sealed INTERRUPTED at the last recorded watermark; nothing restarted it
            assert got.state == pb.Generation.State.INTERRUPTED and got.epoch == 1
            assert got.usage.output_tokens == delivered and got.usage_final
            # the dead local worker is restarted: new generations are served again
            deadline = asyncio.get_running_loop().time() + 120
            while True:
                try:
                    short = pb.GenerateRequest(model="smollm2-135m", prompt="Hi", max_output_tokens=3)
                    events = [e async for e in stub.Generate(short, metadata=auth(), timeout=60)]
                    break
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
                    assert asyncio.get_running_loop().time() < deadline, "the worker was not restarted"
                    await asyncio.sleep(0.5)
            assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    finally:
        await asyncio.to_thread(own.stop_workers)
