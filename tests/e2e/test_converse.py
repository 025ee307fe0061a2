"""Converse over real gRPC, a real worker and the real store: several generations multiplexed on one
bidirectional stream, cancel frames, ack-based flow control (pause, then SLOW_CONSUMER), refused
frames answered with `rejected` events while the stream goes on, half-close and disconnect."""

from __future__ import annotations

from collections import defaultdict

import grpc

from frontend.api_errors import error_info
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_BETA, auth, platform_config
from tests.e2e.test_generate import generate, token_ids
from tests.e2e.test_slow_consumer import recorded_reason, wait_for_state
from tests.e2e.worker_metrics import wait_until_idle

State = pb.Generation.State
Reason = pb.Finished.Reason
WINDOW = platform_config().frontend.converse_window_events
MAX_EVENTS = platform_config().frontend.stream_max_events


def start(request_id: str, prompt: str, n: int, ignore_eos: bool = False) -> pb.ConverseRequest:
    req = pb.GenerateRequest(
        request_id=request_id,
        model="smollm2-135m",
        prompt=prompt,
        max_output_tokens=n,
        sampling=pb.SamplingParams(ignore_eos=ignore_eos),
    )
    return pb.ConverseRequest(start=req)


def ack(event: pb.GenerationEvent) -> pb.ConverseRequest:
    return pb.ConverseRequest(ack=pb.Ack(generation_id=event.generation_id, sequence=event.sequence))


def converse(channel: grpc.aio.Channel, key: str | None = None) -> grpc.aio.StreamStreamCall:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    return stub.Converse(metadata=auth(key) if key else auth(), timeout=120)


async def read(call: grpc.aio.StreamStreamCall) -> pb.GenerationEvent:
    event = await call.read()
    assert event is not grpc.aio.EOF, "the stream ended early"
    return event


async def read_acking(
    call: grpc.aio.StreamStreamCall, finishes: int = 1
) -> dict[str, list[pb.GenerationEvent]]:
    """Each generation's events, read and acked one by one until `finishes` generations finished."""
    events: dict[str, list[pb.GenerationEvent]] = defaultdict(list)
    while finishes:
        event = await read(call)
        events[event.generation_id].append(event)
        await call.write(ack(event))
        finishes -= event.HasField("finished")
    return events


def rejection(event: pb.GenerationEvent) -> tuple[grpc.StatusCode, str, str, str]:
    """(code, reason, generation id, request id) of a `rejected` event."""
    assert event.HasField("rejected") and event.sequence == 0
    info = error_info(event.rejected.status)
    assert info is not None and info.domain == "llm.v1"
    code = next(c for c in grpc.StatusCode if c.value[0] == event.rejected.status.code)
    return code, info.reason, event.generation_id, event.rejected.request_id


async def test_two_generations_share_one_stream_numbered_and_identical_to_generate(channel) -> None:
    prompts = {"conv-a": "The capital of France is", "conv-b": "def fibonacci(n):"}
    call = converse(channel)
    for request_id, prompt in prompts.items():
        await call.write(start(request_id, prompt, 12))
    events = await read_acking(call, finishes=2)
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF  # half-closed and every generation finished
    assert await call.code() == grpc.StatusCode.OK
    assert len(events) == 2
    by_request = {mine[0].started.request_id: mine for mine in events.values()}
    for request_id, prompt in prompts.items():
        mine = by_request[request_id]
        assert [e.sequence for e in mine] == list(range(1, len(mine) + 1))
        assert len(mine) > WINDOW  # flowed past the window on acks
        assert mine[-1].finished.reason == Reason.OUTPUT_LIMIT and mine[-1].finished.usage_final
        reference = await generate(
            channel, pb.GenerateRequest(model="smollm2-135m", prompt=prompt, max_output_tokens=12)
        )
        assert token_ids(mine) == token_ids(reference) and len(token_ids(mine)) == 12


async def test_cancel_frame_ends_the_generation_canceled_and_frees_its_blocks(
    channel, platform: Platform
) -> None:
    call = converse(channel)
    await call.write(start("conv-cancel", "Count:", 400, ignore_eos=True))
    started = await read(call)
    gid = started.generation_id
    await call.write(pb.ConverseRequest(cancel=gid))
    events = [started, *(await read_acking(call))[gid]]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    finished = events[-1].finished
    assert finished.reason == Reason.CANCELED and finished.usage_final
    assert finished.usage.output_tokens == len(token_ids(events)) < 400
    got = await wait_for_state(generations_pb2_grpc.GenerationsStub(channel), gid, State.CANCELED)
    assert got.state == State.CANCELED and got.usage.output_tokens == finished.usage.output_tokens
    assert recorded_reason(platform, "alpha", gid) == "CANCELED"
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF
    idle = await wait_until_idle(platform)
    assert idle["llm_worker_kv_blocks:used"] == 0


async def test_refused_frames_are_rejected_events_and_the_stream_goes_on(channel) -> None:
    beta = await generate(
        channel, pb.GenerateRequest(model="smollm2-135m", prompt="Hi", max_output_tokens=2), KEY_BETA
    )
    beta_id = beta[0].generation_id
    call = converse(channel)
    bad = start("conv-bad", "Hello", 4)
    bad.start.max_output_tokens = 0
    await call.write(bad)
    await call.write(pb.ConverseRequest())
    await call.write(pb.ConverseRequest(cancel="no-such-generation"))
    await call.write(pb.ConverseRequest(cancel=beta_id))  # another tenant's: not found, not leaked
    await call.write(
        pb.ConverseRequest(ack=pb.Ack(generation_id="no-such-generation", sequence=3))
    )  # ignored
    assert [rejection(await read(call)) for _ in range(4)] == [
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_MAX_OUTPUT_TOKENS", "", "conv-bad"),
        (grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_FRAME", "", ""),
        (grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND", "no-such-generation", ""),
        (grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND", beta_id, ""),
    ]
    await call.write(start("conv-after-bad", "Hello", 4))
    started = await read(call)
    events = [started, *(await read_acking(call))[started.generation_id]]
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and len(token_ids(events)) == 4
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF and await call.code() == grpc.StatusCode.OK
    stub = generations_pb2_grpc.GenerationsStub(channel)
    untouched = await stub.GetGeneration(
        pb.GetGenerationRequest(generation_id=beta_id), metadata=auth(KEY_BETA)
    )
    assert untouched.state == State.COMPLETED
    try:
        await stub.GetGeneration(pb.GetGenerationRequest(request_id="conv-bad"), metadata=auth())
        raise AssertionError("the refused start recorded a generation")
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.NOT_FOUND


async def test_without_acks_a_generation_pauses_at_the_window_then_is_cancelled_as_slow_consumer(
    channel, platform: Platform
) -> None:
    call = converse(channel)
    await call.write(start("conv-slow", "Count:", 400, ignore_eos=True))
    head = [await read(call) for _ in range(WINDOW)]  # read, never acked
    gid = head[0].generation_id
    assert [e.sequence for e in head] == list(range(1, WINDOW + 1))
    got = await wait_for_state(generations_pb2_grpc.GenerationsStub(channel), gid, State.CANCELED)
    assert got.state == State.CANCELED and got.finish_reason == Reason.CANCELED and got.usage_final
    assert recorded_reason(platform, "alpha", gid) == "SLOW_CONSUMER"
    # nothing beyond the window was sent meanwhile: a generation started now is read next
    await call.write(start("conv-marker", "Hello", 2))
    marker = await read(call)
    assert marker.HasField("started") and marker.started.request_id == "conv-marker"
    rest = await read_acking(call)
    # acks release the paused one's retained events: all of them, with no gap, ending CANCELED
    await call.write(ack(head[-1]))
    tail = (await read_acking(call))[gid]
    assert not rest[gid] and rest[marker.generation_id][-1].HasField("finished")
    events = head + tail
    # the log held 64 unacked events, then the one produced when the wait timed out, usage, finished
    assert [e.sequence for e in events] == list(range(1, MAX_EVENTS + 4))
    finished = events[-1].finished
    assert finished.reason == Reason.CANCELED and finished.usage_final
    assert finished.usage.output_tokens == got.usage.output_tokens == len(token_ids(events))
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF
    idle = await wait_until_idle(platform)
    assert idle["llm_worker_kv_blocks:used"] == 0


async def test_after_half_close_the_stream_flows_without_acks_and_ends(channel) -> None:
    call = converse(channel)
    await call.write(start("conv-half", "Once upon a time", 20, ignore_eos=True))
    await call.done_writing()  # no acks can follow
    events = []
    while (event := await call.read()) is not grpc.aio.EOF:
        events.append(event)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert len(events) > WINDOW and len(token_ids(events)) == 20
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    assert await call.code() == grpc.StatusCode.OK


async def test_a_client_that_goes_away_leaves_its_generations_to_the_grace_period(
    channel, platform: Platform
) -> None:
    call = converse(channel)
    await call.write(start("conv-gone", "Count:", 400, ignore_eos=True))
    gid = (await read(call)).generation_id
    call.cancel()  # disconnect, never resumed
    got = await wait_for_state(generations_pb2_grpc.GenerationsStub(channel), gid, State.CANCELED)
    assert got.state == State.CANCELED and got.usage_final
    assert recorded_reason(platform, "alpha", gid) == "DISCONNECTED"  # the grace ran out, not the window
    idle = await wait_until_idle(platform)
    assert idle["llm_worker_kv_blocks:used"] == 0
