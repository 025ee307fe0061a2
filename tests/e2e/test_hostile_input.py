"""Hostile input over the real frontend (issue 12, rows 4, 5, 10): oversized requests are refused before
any expensive work while health keeps answering, malformed bytes and impossible timestamps are
INVALID_ARGUMENT (never UNKNOWN), and a refused Converse frame echoes a bounded amount of input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc, usage_pb2, usage_pb2_grpc
from tests.e2e.conftest import auth
from tests.e2e.test_errors import expect_error

MODEL = "smollm2-135m"
HANG_S = 60.0  # generous: only a frozen event loop fails it, never a slow machine


async def test_oversized_requests_are_refused_and_health_keeps_answering(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    huge = pb.GenerateRequest(model=MODEL, prompt="x" * 2_000_000, max_output_tokens=4)  # > 1 MiB
    many = pb.GenerateRequest(
        model=MODEL,
        messages=pb.ChatMessages(messages=[pb.ChatMessage(role="user", content="") for _ in range(100_000)]),
        max_output_tokens=4,
    )
    long_text = pb.GenerateRequest(model=MODEL, prompt="word " * 60_000, max_output_tokens=4)  # 300 k chars
    refusals = [
        expect_error(lambda: stub.Generate(huge, metadata=auth()), grpc.StatusCode.RESOURCE_EXHAUSTED, None),
        expect_error(
            lambda: stub.Generate(many, metadata=auth()),
            grpc.StatusCode.INVALID_ARGUMENT,
            "TOO_MANY_MESSAGES",
        ),
        expect_error(
            lambda: stub.Generate(long_text, metadata=auth()),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INPUT_TOO_LONG",
        ),
    ]
    health = health_pb2_grpc.HealthStub(channel)
    checks = [health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S) for _ in range(3)]
    results = await asyncio.gather(*refusals, *checks)
    assert all(r.status == health_pb2.HealthCheckResponse.SERVING for r in results[3:])


async def test_malformed_bytes_and_impossible_timestamps_are_invalid_argument(channel) -> None:
    raw = channel.unary_stream("/llm.v1.Generations/Generate")
    await expect_error(
        lambda: raw(b"\x0a\xff\xff\xff\xff", metadata=auth()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "MALFORMED_REQUEST",
    )
    usage = usage_pb2_grpc.UsageStub(channel)
    for bad in (Timestamp(seconds=253402300800 + 1), Timestamp(seconds=10, nanos=-1)):
        await expect_error(
            lambda bad=bad: usage.GetUsage(usage_pb2.GetUsageRequest(window_start=bad), metadata=auth()),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_WINDOW",
        )


async def test_a_refused_converse_frame_echoes_a_bounded_amount(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    start = pb.GenerateRequest(model="m" * 200_000, request_id="r" * 50_000, prompt="Hi", max_output_tokens=1)
    frames = [pb.ConverseRequest(start=start) for _ in range(3)]

    async def requests() -> AsyncIterator[pb.ConverseRequest]:
        for frame in frames:
            yield frame

    call = stub.Converse(requests(), metadata=auth())
    rejected = [await call.read() for _ in frames]
    call.cancel()
    for event in rejected:
        assert event.HasField("rejected")
        assert len(event.SerializeToString()) < 4096  # the frame sent was 250 KB
