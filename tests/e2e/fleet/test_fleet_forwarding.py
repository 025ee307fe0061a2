"""Any frontend answers for any generation (issue 13, point 3): Resume, CancelGeneration, Converse
cancel frames and a retried Generate reaching the frontend that does not run the generation are
forwarded to its owner over the relay, and stream back with no gap or duplicate; GetGeneration
reads the store; the tenant rules hold on the way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from llm.v1 import generations_pb2 as pb
from tests.e2e.conftest import KEY_BETA, auth
from tests.e2e.fleet.client import (
    Reason,
    State,
    cancel,
    generate,
    get,
    output_tokens,
    read,
    read_rest,
    reason_of,
    request,
    resume,
    sequences,
    stub,
)
from tests.e2e.fleet.harness import Fleet
from tests.e2e.worker_metrics import wait_until_idle_at

pytestmark = pytest.mark.fleet
Channels = tuple[grpc.aio.Channel, grpc.aio.Channel]


async def test_resume_through_the_other_frontend_continues_with_no_gap_or_duplicate(
    channels: Channels,
) -> None:
    f1, f2 = channels
    call = generate(f1, request(40))
    first = await read(call, 5)
    call.cancel()  # the client's connection to f1 is gone; the generation runs on there
    rest = await read_rest(resume(f2, first[0].generation_id, first[-1].sequence))
    events = first + rest
    assert sequences(events) == list(range(1, len(events) + 1))
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and len(output_tokens(events)) == 40
    got = await get(f2, first[0].generation_id)  # from the store
    assert (got.state, got.usage.output_tokens, got.usage_final) == (State.COMPLETED, 40, True)


async def test_a_retried_request_id_through_the_other_frontend_reattaches_to_the_owners_stream(
    channels: Channels,
) -> None:
    f1, f2 = channels
    req = request(12, request_id="fleet-retry-1")
    original = await read_rest(generate(f1, req))
    replayed = await read_rest(generate(f2, req))  # the same request: its stream, from sequence 1
    assert replayed == original and original[-1].finished.reason == Reason.OUTPUT_LIMIT


async def test_cancel_through_the_other_frontend_stops_the_run_on_its_owner(
    whole_fleet: Fleet, channels: Channels
) -> None:
    f1, f2 = channels
    call = generate(f1, request(400))
    started = await read(call, 2)
    gid = started[0].generation_id
    answer = await cancel(f2, gid)  # forwarded: the owner stops the run and answers once it ended
    assert answer.state == State.CANCELED and answer.usage_final
    rest = await read_rest(call)
    assert rest[-1].finished.reason == Reason.CANCELED
    assert sequences(started + rest) == list(range(1, len(started) + len(rest) + 1))
    assert (await cancel(f2, gid)).state == State.CANCELED  # cancelling again: its terminal state
    for worker in whole_fleet.workers:  # the worker request was cancelled, its blocks freed
        assert (await wait_until_idle_at(worker.metrics_url, 120))["llm_worker_kv_blocks:used"] == 0


async def test_a_converse_cancel_frame_on_the_other_frontend_reaches_the_owner(channels: Channels) -> None:
    f1, f2 = channels
    call = generate(f1, request(400))
    gid = (await read(call, 1))[0].generation_id

    async def frames() -> AsyncIterator[pb.ConverseRequest]:
        yield pb.ConverseRequest(cancel=gid)

    conversation = [e async for e in stub(f2).Converse(frames(), metadata=auth(), timeout=180)]
    assert conversation == []  # no `rejected`: the frame was acted on; the stream ended at half-close
    rest = await read_rest(call)
    assert rest[-1].finished.reason == Reason.CANCELED
    assert (await get(f2, gid)).state == State.CANCELED


async def test_forwarded_calls_keep_the_tenant_rules(channels: Channels) -> None:
    """Another tenant's generation is NOT_FOUND through the other frontend too (its existence is
    not revealed), and so is an unknown id."""
    f1, f2 = channels
    events = await read_rest(generate(f1, request(4)))
    gid = events[0].generation_id
    for call in (
        lambda: read_rest(resume(f2, gid, 0, key=KEY_BETA)),
        lambda: cancel(f2, gid, key=KEY_BETA),
        lambda: get(f2, gid, key=KEY_BETA),
        lambda: read_rest(resume(f2, "no-such-generation", 0)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call()
        assert (refused.value.code(), reason_of(refused.value)) == (
            grpc.StatusCode.NOT_FOUND,
            "GENERATION_NOT_FOUND",
        )


async def test_the_relay_is_not_on_the_public_port_and_needs_its_credential(whole_fleet: Fleet) -> None:
    f1 = whole_fleet.frontends[0]
    method = "/llm.internal.v1.Relay/Resume"
    for address, key, code in (
        (f1.address, None, grpc.StatusCode.UNIMPLEMENTED),  # the public port serves no relay
        (f"127.0.0.1:{f1.ports['relay']}", None, grpc.StatusCode.UNAUTHENTICATED),
        (f"127.0.0.1:{f1.ports['relay']}", "key-alpha", grpc.StatusCode.UNAUTHENTICATED),  # a tenant key
    ):
        async with grpc.aio.insecure_channel(address) as channel:
            call = channel.unary_stream(
                method, pb.ResumeRequest.SerializeToString, pb.GenerationEvent.FromString
            )
            metadata = auth() if key is None else (("llm-relay-key", key), ("llm-tenant", "alpha"))
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await asyncio.wait_for(
                    read_rest(call(pb.ResumeRequest(generation_id="g"), metadata=metadata)), 60
                )
            assert refused.value.code() == code
