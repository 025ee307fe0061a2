"""Generation identity, retained streams, Resume, GetGeneration and CancelGeneration over real gRPC,
a real worker and the real store; and the bill matches what was streamed."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from billing.totals import generation_usage
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc, usage_pb2, usage_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_BETA, KEY_GAMMA, auth, disconnect_grace
from tests.e2e.test_errors import expect_error
from tests.e2e.test_generate import generate, token_ids
from tests.e2e.worker_metrics import frontend_scrape

Reason = pb.Finished.Reason
State = pb.Generation.State


def request(request_id: str, prompt: str = "The capital of France is", n: int = 8) -> pb.GenerateRequest:
    return pb.GenerateRequest(request_id=request_id, model="smollm2-135m", prompt=prompt, max_output_tokens=n)


async def test_retry_with_the_same_payload_replays_the_same_generation(channel, platform: Platform) -> None:
    first = await generate(channel, request("same-1"))
    again = await generate(channel, request("same-1"))
    assert again == first  # the retained stream from sequence 1: same id, epoch, events
    stub = generations_pb2_grpc.GenerationsStub(channel)
    got = await stub.GetGeneration(pb.GetGenerationRequest(request_id="same-1"), metadata=auth())
    assert got.generation_id == first[0].generation_id and got.state == State.COMPLETED
    assert platform.store is not None
    with platform.store.transaction() as s:
        bill = generation_usage(s, got.generation_id)
    assert bill.final and bill.billed.output_tokens == len(token_ids(first)) == 8  # counted once


async def test_same_request_id_with_another_payload_is_already_exists(channel) -> None:
    await generate(channel, request("conflict-1"))
    stub = generations_pb2_grpc.GenerationsStub(channel)
    error = await expect_error(
        lambda: stub.Generate(request("conflict-1", n=9), metadata=auth()),
        grpc.StatusCode.ALREADY_EXISTS,
        "REQUEST_ID_CONFLICT",
    )
    assert "different request" in (error.details() or "")


async def test_get_generation_by_id_and_request_id_and_not_for_other_tenants(channel) -> None:
    events = await generate(channel, request("get-1"))
    gid = events[0].generation_id
    stub = generations_pb2_grpc.GenerationsStub(channel)
    by_id = await stub.GetGeneration(pb.GetGenerationRequest(generation_id=gid), metadata=auth())
    by_request = await stub.GetGeneration(pb.GetGenerationRequest(request_id="get-1"), metadata=auth())
    assert by_id == by_request
    assert by_id.state == State.COMPLETED and by_id.finish_reason == Reason.OUTPUT_LIMIT
    assert by_id.epoch == 1 and by_id.usage_final
    assert by_id.usage.output_tokens == 8 and by_id.usage.input_tokens == events[0].started.input_tokens
    assert by_id.model_version == events[0].started.model_version
    for req in (pb.GetGenerationRequest(generation_id=gid), pb.GetGenerationRequest(request_id="get-1")):
        await expect_error(
            lambda req=req: stub.GetGeneration(req, metadata=auth(KEY_BETA)),
            grpc.StatusCode.NOT_FOUND,
            "GENERATION_NOT_FOUND",
        )


async def test_resume_replays_after_the_cursor_with_no_gap_or_duplicate(channel, platform: Platform) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    full = await generate(channel, request("resume-1", n=20))
    gid = full[0].generation_id
    tail = [
        e async for e in stub.Resume(pb.ResumeRequest(generation_id=gid, after_sequence=5), metadata=auth())
    ]
    assert tail == full[5:]
    with disconnect_grace(platform, 120.0):
        live = stub.Generate(request("resume-live", n=25), metadata=auth())
        head = [await live.read() for _ in range(4)]
        live.cancel()  # disconnect mid-stream, then resume within the grace period
        gid2 = head[0].generation_id
        resumed = stub.Resume(pb.ResumeRequest(generation_id=gid2, after_sequence=4), metadata=auth())
        rest = [e async for e in resumed]
    events = head + rest
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and len(token_ids(events)) == 25
    await expect_error(
        lambda: stub.Resume(pb.ResumeRequest(generation_id=gid2), metadata=auth(KEY_BETA)),
        grpc.StatusCode.NOT_FOUND,
        "GENERATION_NOT_FOUND",
    )


async def test_cursor_no_longer_retained_is_out_of_range(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = request("expired-1", n=100)
    req.sampling.ignore_eos = True
    events = await generate(channel, req)  # 100 deltas: more than the 64 events retained
    assert events[-1].sequence > 64
    await expect_error(
        lambda: stub.Resume(pb.ResumeRequest(generation_id=events[0].generation_id), metadata=auth()),
        grpc.StatusCode.OUT_OF_RANGE,
        "CURSOR_EXPIRED",
    )
    tail = [
        e
        async for e in stub.Resume(
            pb.ResumeRequest(generation_id=events[0].generation_id, after_sequence=events[-1].sequence - 3),
            metadata=auth(),
        )
    ]
    assert tail == events[-3:]


async def test_a_finished_stream_forgotten_for_the_byte_budget_is_cursor_expired(
    channel, platform: Platform
) -> None:
    """Beyond [frontend] stream_retain_max_bytes the oldest finished streams go first: a Resume of
    one is OUT_OF_RANGE / CURSOR_EXPIRED, as after stream_retain_s, and the eviction is counted."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    assert platform.manager is not None
    live = platform.manager.live
    first = await generate(channel, request("evicted-1"))
    before = frontend_scrape(platform)["llm_retained_streams_evicted_total"]
    budget, live.retain_max_bytes = live.retain_max_bytes, 1  # the next close forgets every finished one
    try:
        await generate(channel, request("evicted-2"))
    finally:
        live.retain_max_bytes = budget
    await expect_error(
        lambda: stub.Resume(pb.ResumeRequest(generation_id=first[0].generation_id), metadata=auth()),
        grpc.StatusCode.OUT_OF_RANGE,
        "CURSOR_EXPIRED",
    )
    assert frontend_scrape(platform)["llm_retained_streams_evicted_total"] >= before + 2


async def test_cancel_generation_mid_stream_then_again_and_after_finish(channel, platform: Platform) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    call = stub.Generate(
        pb.GenerateRequest(
            request_id="cancel-1",
            model="smollm2-135m",
            prompt="Count:",
            max_output_tokens=4000,
            sampling=pb.SamplingParams(ignore_eos=True),
        ),
        metadata=auth(),
    )
    started = await call.read()
    gid = started.generation_id
    key = 'llm_cancellation_lag_seconds_{}{{reason="CANCELED"}}'
    before = frontend_scrape(platform)
    canceled = await stub.CancelGeneration(pb.CancelGenerationRequest(generation_id=gid), metadata=auth())
    after_cancel = frontend_scrape(platform)  # measured: intent to worker request cancelled and sealed
    assert after_cancel[key.format("count")] == before.get(key.format("count"), 0.0) + 1
    assert 0 < after_cancel[key.format("sum")] - before.get(key.format("sum"), 0.0) < 30
    assert canceled.state == State.CANCELED and canceled.finish_reason == Reason.CANCELED
    rest = []
    while (event := await call.read()) is not grpc.aio.EOF:
        rest.append(event)
    assert rest[-1].finished.reason == Reason.CANCELED and rest[-1].finished.usage_final
    streamed = sum(len(e.delta.token_ids) for e in rest if e.HasField("delta"))
    assert rest[-1].finished.usage.output_tokens >= streamed
    assert canceled.usage.output_tokens == rest[-1].finished.usage.output_tokens  # billed what it made
    again = await stub.CancelGeneration(pb.CancelGenerationRequest(generation_id=gid), metadata=auth())
    assert again == canceled  # harmless
    done = await generate(channel, request("cancel-done"))
    after = await stub.CancelGeneration(
        pb.CancelGenerationRequest(generation_id=done[0].generation_id), metadata=auth()
    )
    assert after.state == State.COMPLETED  # a finished generation reports its terminal state
    await expect_error(
        lambda: stub.CancelGeneration(pb.CancelGenerationRequest(generation_id=gid), metadata=auth(KEY_BETA)),
        grpc.StatusCode.NOT_FOUND,
        "GENERATION_NOT_FOUND",
    )


async def test_tenant_quota_is_resource_exhausted_and_records_nothing(channel, platform: Platform) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    first = stub.Generate(request("quota-1", n=200), metadata=auth(KEY_GAMMA))
    assert (await first.read()).HasField("started")  # gamma's one concurrent generation
    try:
        error = await expect_error(
            lambda: stub.Generate(request("quota-2"), metadata=auth(KEY_GAMMA)),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "QUOTA_EXCEEDED",
        )
        status = rpc_status.from_call(error)
        assert status is not None
        retry = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
        assert len(retry) == 1  # a jittered retry hint
        await expect_error(
            lambda: stub.GetGeneration(
                pb.GetGenerationRequest(request_id="quota-2"), metadata=auth(KEY_GAMMA)
            ),
            grpc.StatusCode.NOT_FOUND,
            "GENERATION_NOT_FOUND",
        )  # the refused request left no generation behind
    finally:
        await stub.CancelGeneration(
            pb.CancelGenerationRequest(
                generation_id=(
                    await stub.GetGeneration(
                        pb.GetGenerationRequest(request_id="quota-1"), metadata=auth(KEY_GAMMA)
                    )
                ).generation_id
            ),
            metadata=auth(KEY_GAMMA),
        )
        first.cancel()
    events = await generate(channel, request("quota-3"), key=KEY_GAMMA)  # the slot is free again
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT


async def test_get_usage_counts_what_was_billed_for_the_callers_tenant(channel) -> None:
    usage = usage_pb2_grpc.UsageStub(channel)
    before = await usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(KEY_GAMMA))
    events = await generate(channel, request("usage-1", n=8), key=KEY_GAMMA)
    after = await usage.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(KEY_GAMMA))
    assert after.tenant == "gamma"
    assert after.generations - before.generations == 1
    assert after.output_tokens - before.output_tokens == len(token_ids(events)) == 8
    assert after.input_tokens - before.input_tokens == events[0].started.input_tokens
    window = usage_pb2.GetUsageRequest()
    window.window_start.FromSeconds(1)
    window.window_end.FromSeconds(2)  # long before any generation
    empty = await usage.GetUsage(window, metadata=auth(KEY_GAMMA))
    assert (empty.generations, empty.output_tokens) == (0, 0)
    await expect_error(
        lambda: usage.GetUsage(usage_pb2.GetUsageRequest(tenant="alpha"), metadata=auth(KEY_GAMMA)),
        grpc.StatusCode.PERMISSION_DENIED,
        "TENANT_MISMATCH",
    )
    backwards = usage_pb2.GetUsageRequest()
    backwards.window_start.FromSeconds(10)
    backwards.window_end.FromSeconds(5)
    await expect_error(
        lambda: usage.GetUsage(backwards, metadata=auth(KEY_GAMMA)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_WINDOW",
    )
