"""A slow consumer is paused, then cancelled with reason SLOW_CONSUMER (docs/design.md §4), over real gRPC,
a real worker and the real store: nothing it was sent is lost, its usage is sealed, and the worker's
KV blocks return to the pool. (The Converse, ack-driven, path is in test_converse.py.)"""

from __future__ import annotations

import asyncio

import grpc

from control.generations import get_generation
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import auth, platform_config
from tests.e2e.test_generate import token_ids
from tests.e2e.worker_metrics import wait_until_idle

State = pb.Generation.State
Reason = pb.Finished.Reason
MAX_EVENTS = platform_config().frontend.stream_max_events
# A client that reads nothing lets the server write only ~1 KiB (about 20 events) before HTTP/2 flow
# control blocks grpc's write: no BDP probing to grow the window, a 1 KiB stream window.
SLOW_CLIENT = (("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024))


async def wait_for_state(
    stub: generations_pb2_grpc.GenerationsStub, generation_id: str, state: int, timeout_s: float = 60.0
) -> pb.Generation:
    """Polls GetGeneration until the generation is in `state`; returns the last reading."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        got = await stub.GetGeneration(pb.GetGenerationRequest(generation_id=generation_id), metadata=auth())
        if got.state == state or asyncio.get_running_loop().time() > deadline:
            return got
        await asyncio.sleep(0.1)


def recorded_reason(platform: Platform, tenant_id: str, generation_id: str) -> str | None:
    """The terminal reason the control store recorded (what an operator sees)."""
    assert platform.store is not None
    with platform.store.transaction() as s:
        return get_generation(s, tenant_id, generation_id).terminal_reason


async def test_a_generate_client_that_stops_reading_is_paused_then_cancelled(
    frontend_port: int, channel: grpc.aio.Channel, platform: Platform
) -> None:
    control = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="Count:",
        max_output_tokens=400,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{frontend_port}", options=SLOW_CLIENT) as slow:
        call = generations_pb2_grpc.GenerationsStub(slow).Generate(req, metadata=auth())
        started = await call.read()  # then reads nothing, keeping the call open
        gid = started.generation_id
        got = await wait_for_state(control, gid, State.CANCELED)
        assert got.state == State.CANCELED and got.finish_reason == Reason.CANCELED
        assert got.usage_final
        assert recorded_reason(platform, "alpha", gid) == "SLOW_CONSUMER"
        # the client reads on: every event was kept for it, with no gap, ending CANCELED
        events = [started]
        while (event := await call.read()) is not grpc.aio.EOF:
            events.append(event)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    finished = events[-1].finished
    assert finished.reason == Reason.CANCELED and finished.usage_final
    streamed = len(token_ids(events))
    assert finished.usage.output_tokens == got.usage.output_tokens == streamed  # billed what it got
    # paused long before the end: at most the log's limit beyond what grpc had taken, plus the
    # event held when the wait timed out and the closing usage and finished
    assert streamed < 400 and len(events) <= MAX_EVENTS + 3 + 40
    idle = await wait_until_idle(platform)
    assert idle["llm_worker_kv_blocks:used"] == 0
