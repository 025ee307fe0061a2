"""A generation waiting for worker KV memory is QUEUED, visibly: GetGeneration shows it with its place
in the queue, it turns RUNNING (epoch 1) when a worker has room, and cancelling it while it waits
bills nothing."""

from __future__ import annotations

import asyncio

import grpc

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_BETA, auth, interactive_allowance
from tests.e2e.test_errors import expect_error
from tests.e2e.worker_metrics import wait_until_idle

State = pb.Generation.State
MODEL = "smollm2-135m"


def start_hog(stub: generations_pb2_grpc.GenerationsStub) -> grpc.aio.UnaryStreamCall:
    """Alpha's long request: 6,000 output tokens hold 376 of the e2e worker's 600 KV blocks, most
    of alpha's 75% share (450)."""
    req = pb.GenerateRequest(
        model=MODEL, prompt="Count:", max_output_tokens=6000, sampling=pb.SamplingParams(ignore_eos=True)
    )
    return stub.Generate(req, metadata=auth())


async def recorded(stub: generations_pb2_grpc.GenerationsStub, request_id: str) -> pb.Generation:
    """The generation once admission has recorded it (the stream answers nothing while it waits)."""
    deadline = asyncio.get_running_loop().time() + 120  # generous: a hang fails, not a slow machine
    while True:
        try:
            return await stub.GetGeneration(pb.GetGenerationRequest(request_id=request_id), metadata=auth())
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND
            assert asyncio.get_running_loop().time() < deadline, "never recorded"
            await asyncio.sleep(0.05)


async def test_waiting_for_worker_memory_is_queued_then_running(channel, platform: Platform) -> None:
    await wait_until_idle(platform)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = start_hog(stub)
    hog_started = await hog.read()
    assert hog_started.HasField("started")  # 376 of the 600 blocks, most of alpha's 450 (75%)
    waiting = stub.Generate(
        pb.GenerateRequest(model=MODEL, prompt="Hello", max_output_tokens=2000, request_id="queued-1"),
        metadata=auth(),
    )
    queued = await recorded(stub, "queued-1")
    assert (queued.state, queued.epoch, queued.queue_position) == (State.QUEUED, 0, 1)
    assert queued.usage.input_tokens == 0
    await stub.CancelGeneration(
        pb.CancelGenerationRequest(generation_id=hog_started.generation_id), metadata=auth()
    )
    first = await waiting.read()  # the hog's blocks are free: it leaves the queue
    assert first.HasField("started") and first.epoch == 1
    running = await stub.GetGeneration(pb.GetGenerationRequest(request_id="queued-1"), metadata=auth())
    assert (running.state, running.epoch, running.queue_position) in (
        (State.RUNNING, 1, 0),
        (State.COMPLETED, 1, 0),
    )
    waiting.cancel()


async def test_cancelling_a_queued_generation_bills_nothing(channel, platform: Platform) -> None:
    await wait_until_idle(platform)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = start_hog(stub)
    assert (await hog.read()).HasField("started")
    try:
        waiting = stub.Generate(
            pb.GenerateRequest(
                model=MODEL, prompt="Hello there", max_output_tokens=2000, request_id="queued-2"
            ),
            metadata=auth(),
        )
        queued = await recorded(stub, "queued-2")
        assert queued.state == State.QUEUED
        ended = await stub.CancelGeneration(
            pb.CancelGenerationRequest(generation_id=queued.generation_id), metadata=auth()
        )
        assert (ended.state, ended.finish_reason, ended.epoch) == (
            State.CANCELED,
            pb.Finished.Reason.CANCELED,
            0,
        )
        assert (ended.usage.input_tokens, ended.usage.output_tokens) == (0, 0)
        events = [e async for e in waiting]
        assert events[-1].finished.reason == pb.Finished.Reason.CANCELED
        assert events[-1].finished.usage.input_tokens == 0  # nothing was processed
        # nothing ran, so nothing will ever be billed: final, on the stream and in the store alike
        got = await stub.GetGeneration(pb.GetGenerationRequest(request_id="queued-2"), metadata=auth())
        assert events[-1].finished.usage_final and ended.usage_final and got.usage_final
    finally:
        hog.cancel()
    await wait_until_idle(platform)


async def test_a_capacity_refusal_leaves_the_request_id_free_for_a_retry(channel, platform: Platform) -> None:
    await wait_until_idle(platform)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = start_hog(stub)
    hog_started = await hog.read()
    assert hog_started.HasField("started")
    req = pb.GenerateRequest(model=MODEL, prompt="Hello", max_output_tokens=2000, request_id="retry-1")
    try:
        with interactive_allowance(platform, 0.5):
            await expect_error(
                lambda: stub.Generate(req, metadata=auth()), grpc.StatusCode.UNAVAILABLE, "WORKER_CAPACITY"
            )
        await expect_error(  # refused before it ran: no record is left of it
            lambda: stub.GetGeneration(pb.GetGenerationRequest(request_id="retry-1"), metadata=auth()),
            grpc.StatusCode.NOT_FOUND,
            "GENERATION_NOT_FOUND",
        )
    finally:
        await stub.CancelGeneration(
            pb.CancelGenerationRequest(generation_id=hog_started.generation_id), metadata=auth()
        )
    retry = stub.Generate(req, metadata=auth())  # the same request again, once memory is free
    started = await retry.read()
    assert started.HasField("started") and started.started.request_id == "retry-1"
    await stub.CancelGeneration(
        pb.CancelGenerationRequest(generation_id=started.generation_id), metadata=auth()
    )
    assert (await recorded(stub, "retry-1")).state == State.CANCELED
    hog.cancel()


async def test_one_tenant_cannot_take_the_memory_another_tenant_needs(channel, platform: Platform) -> None:
    """Issue 12 row 6: alpha holds most of its 75% share and asks for more; its second request waits
    (QUEUED) while beta's small request runs at once on the room kept for other tenants."""
    await wait_until_idle(platform)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = start_hog(stub)
    hog_started = await hog.read()
    more = stub.Generate(
        pb.GenerateRequest(model=MODEL, prompt="More", max_output_tokens=2000, request_id="alpha-more"),
        metadata=auth(),
    )
    try:
        assert (await recorded(stub, "alpha-more")).state == State.QUEUED  # over alpha's share
        small = pb.GenerateRequest(model=MODEL, prompt="Hi", max_output_tokens=4)
        events = [e async for e in stub.Generate(small, metadata=auth(KEY_BETA))]
        assert events[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
        assert (await recorded(stub, "alpha-more")).state == State.QUEUED  # still waiting for alpha's room
    finally:
        await stub.CancelGeneration(
            pb.CancelGenerationRequest(generation_id=hog_started.generation_id), metadata=auth()
        )
        more.cancel()
        hog.cancel()
    await wait_until_idle(platform)
