"""The Python SDK (clients/python, `llm_platform`) against the live platform: typed events, a stream
broken for real (a TCP proxy the test cuts) resumed with no gap or duplicate, a call broken before
its first event retried under the same request id, cancel, get, usage, and typed refusals."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from llm_platform import ApiError, AsyncClient, Client, Delta, Finished, RetryPolicy, Started

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from tests.e2e.conftest import KEY_SDK, KEY_SDK_SOLO, auth
from tests.e2e.tcp_proxy import proxy_to

FAST_RETRY = RetryPolicy(max_attempts=5, initial_backoff=0.05)


async def retained(channel: grpc.aio.Channel, generation_id: str) -> list[pb.GenerationEvent]:
    """The generation's whole retained stream, read directly (the reference for no gap/duplicate)."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    request = pb.ResumeRequest(generation_id=generation_id, after_sequence=0)
    return [e async for e in stub.Resume(request, metadata=auth(KEY_SDK))]


async def recorded(channel: grpc.aio.Channel, request_id: str) -> pb.Generation:
    """Waits until the server has recorded the generation of `request_id`."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    deadline = time.monotonic() + 60
    while True:
        try:
            return await stub.GetGeneration(
                pb.GetGenerationRequest(request_id=request_id), metadata=auth(KEY_SDK)
            )
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.NOT_FOUND and time.monotonic() < deadline
            await asyncio.sleep(0.05)


async def test_a_cut_stream_resumes_with_no_gap_or_duplicate(frontend_port: int, channel) -> None:
    with proxy_to(frontend_port) as proxy, Client(f"127.0.0.1:{proxy.port}", KEY_SDK, retry=FAST_RETRY) as c:
        proxy.cut_after_data(2)  # the connection drops after the stream's second response frame
        stream = c.generate("Count:", max_output_tokens=40, ignore_eos=True)
        events = await asyncio.to_thread(list, stream)
        assert stream.reconnects == 1 and proxy.accepted == 2  # one Resume on a new connection
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    assert events[-1].reason == "OUTPUT_LIMIT" and events[-1].usage.output_tokens == 40
    assert [e.raw for e in events] == await retained(channel, stream.generation_id)
    assert sum(len(e.token_ids) for e in events if isinstance(e, Delta)) == 40


async def test_the_asyncio_client_resumes_a_cut_stream(frontend_port: int, channel) -> None:
    with proxy_to(frontend_port) as proxy:
        async with AsyncClient(f"127.0.0.1:{proxy.port}", KEY_SDK, retry=FAST_RETRY) as c:
            proxy.cut_after_data(2)
            stream = c.generate(messages=[("user", "Count to ten.")], max_output_tokens=24, ignore_eos=True)
            events = [event async for event in stream]
            assert stream.reconnects == 1 and proxy.accepted == 2
            assert (await c.get(stream.generation_id)).state == pb.Generation.COMPLETED
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert [e.raw for e in events] == await retained(channel, stream.generation_id)


async def test_a_call_broken_before_its_first_event_is_retried_under_the_same_request_id(
    frontend_port: int, channel
) -> None:
    with proxy_to(frontend_port) as proxy, Client(f"127.0.0.1:{proxy.port}", KEY_SDK, retry=FAST_RETRY) as c:
        proxy.hold()  # the server gets the call, the client hears nothing
        stream = c.generate("The capital of France is", max_output_tokens=8)
        reading = asyncio.ensure_future(asyncio.to_thread(list, stream))
        first = await recorded(channel, stream.request_id)
        proxy.hold(False)
        assert proxy.cut() == 1
        events = await reading
        assert stream.reconnects == 1
    assert events[0].generation_id == first.generation_id  # re-attached: not a second generation
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[-1], Finished) and events[-1].usage.output_tokens == 8


async def test_the_same_request_id_gets_the_same_generation(frontend_port: int) -> None:
    with Client(f"127.0.0.1:{frontend_port}", KEY_SDK) as c:
        first = await asyncio.to_thread(
            list, c.generate("Hello", max_output_tokens=6, request_id="py-same-1")
        )
        again = await asyncio.to_thread(
            list, c.generate("Hello", max_output_tokens=6, request_id="py-same-1")
        )
        assert again == first and first[0].generation_id
        assert (await asyncio.to_thread(c.get, request_id="py-same-1")).generation_id == first[
            0
        ].generation_id
        with pytest.raises(ApiError) as conflict:
            await asyncio.to_thread(list, c.generate("Hello", max_output_tokens=7, request_id="py-same-1"))
        assert conflict.value.code == grpc.StatusCode.ALREADY_EXISTS
        assert conflict.value.reason == "REQUEST_ID_CONFLICT" and conflict.value.retry_delay is None


def cancel_after_first_delta(stream) -> tuple[list, pb.Generation | None]:
    events, canceled = [], None
    for event in stream:
        events.append(event)
        if isinstance(event, Delta) and canceled is None:
            canceled = stream.cancel()
    return events, canceled


async def test_cancel_ends_the_stream_canceled(frontend_port: int) -> None:
    with Client(f"127.0.0.1:{frontend_port}", KEY_SDK) as c:
        stream = c.generate("Count:", max_output_tokens=400, ignore_eos=True)
        events, canceled = await asyncio.to_thread(cancel_after_first_delta, stream)
        got = await asyncio.to_thread(c.get, stream.generation_id)
    assert canceled is not None and canceled.generation_id == stream.generation_id
    assert isinstance(events[-1], Finished) and events[-1].reason == "CANCELED" and events[-1].usage_final
    assert events[-1].usage.output_tokens < 400
    assert got.state == pb.Generation.CANCELED and got.usage.output_tokens == events[-1].usage.output_tokens


async def test_a_quota_refusal_carries_its_reason_and_retry_delay(frontend_port: int) -> None:
    async with AsyncClient(f"127.0.0.1:{frontend_port}", KEY_SDK_SOLO) as c:
        holder = c.generate("Count:", max_output_tokens=400, ignore_eos=True)
        assert isinstance(await holder.__anext__(), Started)  # the tenant's one slot is taken
        with pytest.raises(ApiError) as refused:
            await c.generate("Hello", max_output_tokens=4).text()
        await holder.cancel()
        rest = [e async for e in holder]
    error = refused.value
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED and error.reason == "QUOTA_EXCEEDED"
    assert error.retry_delay is not None and error.retry_delay > 0
    assert error.quota_violations and error.quota_violations[0].subject
    assert isinstance(rest[-1], Finished) and rest[-1].reason == "CANCELED"


async def test_usage_and_an_invalid_request(frontend_port: int) -> None:
    async with AsyncClient(f"127.0.0.1:{frontend_port}", KEY_SDK) as c:
        before = await c.usage()
        text = await c.generate("The capital of France is", max_output_tokens=5).text()
        after = await c.usage()
        with pytest.raises(ApiError) as invalid:
            await c.generate("Hello", max_output_tokens=0).text()
    assert text and after.tenant == "sdk" and after.output_tokens == before.output_tokens + 5
    assert invalid.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert invalid.value.reason == "INVALID_MAX_OUTPUT_TOKENS" and not invalid.value.is_transport_failure
