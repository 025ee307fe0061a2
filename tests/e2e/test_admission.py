"""Admission past the quotas: the tier's queue deadline (predicted wait), the batch tier, and
fairness between tenants, over real gRPC, the real worker and store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TypeVar

import grpc
import pytest
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_BETA, KEY_DELTA, auth, interactive_allowance
from tests.e2e.test_errors import expect_error

MODEL = "smollm2-135m"
D = TypeVar("D", bound=Message)


def long_prompt(platform: Platform, tokens: int) -> str:
    """A prompt of about `tokens` tokens (checked within 10%)."""
    text = " ".join(f"line {i} of the ledger." for i in range(tokens // 8))  # about 8.1 a line
    n = len(platform.registry.resolve(MODEL).tokenizer.encode(text))
    assert 0.9 * tokens <= n <= 1.1 * tokens, n
    return text


def status_detail(error: grpc.aio.AioRpcError, kind: type[D]) -> D:
    """The error's google.rpc detail of type `kind` (a test failure when it has none)."""
    status = rpc_status.from_call(error)
    assert status is not None
    for detail in status.details:
        if detail.Is(kind.DESCRIPTOR):
            message = kind()
            detail.Unpack(message)
            return message
    raise AssertionError(f"no {kind.__name__}")


def quota_failure(error: grpc.aio.AioRpcError) -> error_details_pb2.QuotaFailure:
    return status_detail(error, error_details_pb2.QuotaFailure)


async def test_token_budgets_are_resource_exhausted_with_quota_failure(
    channel, platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta may hold 250 reserved tokens and produce 100 output tokens a minute."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    # the requests below are all admitted at one instant, so all are charged to the same window
    # whenever the minute turns meanwhile (the admission clock only: runs keep their own)
    assert platform.manager is not None
    admitted_at = datetime.now(UTC)
    monkeypatch.setattr(platform.manager, "clock", lambda: admitted_at)

    def req(rid: str, n: int) -> pb.GenerateRequest:
        return pb.GenerateRequest(model=MODEL, prompt="Hi", max_output_tokens=n, request_id=rid)

    error = await expect_error(
        lambda: stub.Generate(req("delta-big", 300), metadata=auth(KEY_DELTA)),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )
    (violation,) = quota_failure(error).violations
    assert violation.subject == "tenant:delta" and violation.description.startswith("QUEUED_TOKENS")
    done = [e async for e in stub.Generate(req("delta-1", 60), metadata=auth(KEY_DELTA), timeout=60)]
    assert done[-1].HasField("finished")
    error = await expect_error(
        lambda: stub.Generate(req("delta-2", 60), metadata=auth(KEY_DELTA)),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
    )
    (violation,) = quota_failure(error).violations
    assert violation.description.startswith("OUTPUT_TOKENS_PER_MINUTE")
    assert 0 < retry_delay_s(error) <= 60 * 1.5  # the window's reset, jittered
    await expect_error(
        lambda: stub.GetGeneration(pb.GetGenerationRequest(request_id="delta-2"), metadata=auth(KEY_DELTA)),
        grpc.StatusCode.NOT_FOUND,
        "GENERATION_NOT_FOUND",
    )


def retry_delay_s(error: grpc.aio.AioRpcError) -> float:
    return status_detail(error, error_details_pb2.RetryInfo).retry_delay.ToTimedelta().total_seconds()


async def test_queue_deadline_refuses_interactive_admits_batch_and_other_tenants(
    channel, platform: Platform
) -> None:
    """While alpha's 3,000-token prompt is prefilling, alpha's next interactive request is
    predicted to wait past a 0.2 s allowance: UNAVAILABLE/QUEUE_DEADLINE with RetryInfo, nothing
    recorded. The same request on the BATCH tier is accepted, and beta (owed only a fair share of
    its own tiny cost) is admitted at once."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = stub.Generate(
        pb.GenerateRequest(model=MODEL, prompt=long_prompt(platform, 3000), max_output_tokens=2),
        metadata=auth(),
    )
    with interactive_allowance(platform, 0.2):
        try:
            assert (await hog.read()).HasField("started")  # admitted: its prefill is the backlog
            late = pb.GenerateRequest(model=MODEL, prompt="Hello", max_output_tokens=2, request_id="late-1")
            error = await expect_error(
                lambda: stub.Generate(late, metadata=auth()), grpc.StatusCode.UNAVAILABLE, "QUEUE_DEADLINE"
            )
            assert "BATCH" in (error.details() or "")
            assert retry_delay_s(error) >= 1.0
            await expect_error(
                lambda: stub.GetGeneration(pb.GetGenerationRequest(request_id="late-1"), metadata=auth()),
                grpc.StatusCode.NOT_FOUND,
                "GENERATION_NOT_FOUND",
            )
            other = [e async for e in stub.Generate(late, metadata=auth(KEY_BETA), timeout=60)]
            assert other[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
            batch = pb.GenerateRequest(
                model=MODEL, prompt="Hello", max_output_tokens=2, request_id="late-batch", tier=pb.BATCH
            )
            events = [e async for e in stub.Generate(batch, metadata=auth(), timeout=60)]
            assert events[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
        finally:
            hog.cancel()


async def test_short_interactive_requests_are_not_stuck_behind_another_tenants_documents(
    channel, platform: Platform
) -> None:
    """Alpha keeps six long documents in flight; beta's short request gets its first token before
    alpha's documents have all finished their prefill (first-come-first-served would queue it behind
    every one: ~6,600 tokens). An order, not a time: the documents are 1,100 tokens (71 blocks each
    with their output) so all six fit alpha's share of the e2e worker's pool (75% of 600 blocks) and
    are running before beta asks. `python -m bench fairness` measures the real scenario's latencies."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    doc = long_prompt(platform, 1100)
    docs = [
        stub.Generate(
            pb.GenerateRequest(model=MODEL, prompt=f"{i} {doc}", max_output_tokens=16), metadata=auth()
        )
        for i in range(6)
    ]
    prefilled: set[int] = set()  # documents whose first token (end of prefill) has arrived

    async def follow(i: int, call: grpc.aio.UnaryStreamCall) -> None:
        while (event := await call.read()) is not grpc.aio.EOF:  # read() started it: no iterator
            if event.HasField("delta"):
                prefilled.add(i)
                return

    try:
        for call in docs:
            assert (await call.read()).HasField("started")
        readers = [asyncio.create_task(follow(i, call)) for i, call in enumerate(docs)]
        call = stub.Generate(
            pb.GenerateRequest(model=MODEL, prompt="Say hi", max_output_tokens=2),
            metadata=auth(KEY_BETA),
            timeout=120,
        )
        async for event in call:
            if event.HasField("delta"):
                at_first_token = len(prefilled)
                break
        call.cancel()
        assert at_first_token < len(docs), "beta waited for every document's prefill"
        await asyncio.gather(*readers)  # ... and the documents go on to finish theirs
    finally:
        for call in docs:
            call.cancel()
        await asyncio.sleep(0)
