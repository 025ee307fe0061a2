"""Periodic usage events to the client, and live runs whose lease is lost."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc

from lifecycle.termination import sweep_expired_leases
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import auth
from tests.e2e.worker_metrics import wait_until_idle

Reason = pb.Finished.Reason


async def test_cumulative_usage_event_every_32_tokens_then_final(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="Count:",
        max_output_tokens=80,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    events = [e async for e in stub.Generate(req, metadata=auth(), timeout=120)]
    streamed = 0
    usages = []
    for e in events:
        streamed += len(e.delta.token_ids)
        if e.HasField("usage"):
            assert e.usage.usage.output_tokens == streamed  # cumulative, up to this point
            usages.append(e.usage.usage.output_tokens)
    # at least every 32 tokens (sooner when 2 s pass first: a busy machine moves the count, so the
    # assertion is on the gaps), then the closing one at 80
    widest_delta = max(len(e.delta.token_ids) for e in events)
    gaps = [b - a for a, b in zip([0, *usages], usages, strict=False)]
    assert usages[-1] == 80 and len(usages) >= 3
    assert all(0 < g <= 32 + widest_delta - 1 for g in gaps[:-1]), usages
    assert events[-2].HasField("usage") and events[-1].finished.reason == Reason.OUTPUT_LIMIT
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))


async def test_a_run_whose_lease_was_swept_ends_interrupted(channel, platform: Platform) -> None:
    """Another party (the sweeper, as after a stall) interrupts the attempt: the live run finds its
    lease fenced at the next renewal and ends INTERRUPTED, with no second terminal update."""
    assert platform.manager is not None and platform.store is not None
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="Count:",
        max_output_tokens=2000,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    call = stub.Generate(req, metadata=auth(), timeout=120)
    started = await call.read()
    gid = started.generation_id
    swept = sweep_expired_leases(platform.store, now=datetime.now(UTC) + timedelta(hours=1))
    assert gid in [a.generation_id for a in swept]
    await platform.manager.leases.renew()  # what the background task runs every lease_s / 3
    events = []
    while (event := await call.read()) is not grpc.aio.EOF:
        events.append(event)
    assert events[-1].finished.reason == Reason.INTERRUPTED and not events[-1].finished.usage_final
    got = await stub.GetGeneration(pb.GetGenerationRequest(generation_id=gid), metadata=auth())
    assert got.state == pb.Generation.State.INTERRUPTED
    idle = await wait_until_idle(platform)  # the worker request was cancelled: its blocks are back
    assert idle["llm_worker_kv_blocks:used"] == 0
