"""Issue 12 row 1 across two tenants: while beta streams, alpha sends sampling settings at the edge
of what is valid (the temperature 1e-45 that used to fail every live request, the smallest sampling
temperature with the smallest top_p, the largest seed and top_k). Beta's generation completes as if
alone, and so does each of alpha's."""

from __future__ import annotations

import asyncio

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_ALPHA, KEY_BETA, auth

Reason = pb.Finished.Reason
FP32_TINIEST = 1e-45  # rounds to the smallest positive fp32 (a denormal)

EXTREMES = [
    pb.SamplingParams(temperature=FP32_TINIEST),  # the case: greedy after validation
    pb.SamplingParams(temperature=1e-3, top_p=FP32_TINIEST, seed=2**64 - 1),
    pb.SamplingParams(temperature=1e-3, seed=0),
    pb.SamplingParams(temperature=2.0, top_k=1, seed=2**64 - 1),
    pb.SamplingParams(temperature=2.0, top_k=49_152, top_p=1.0, seed=7),
]


async def test_extreme_sampling_from_one_tenant_leaves_the_other_tenants_stream_intact(
    channel, platform: Platform
) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    beta_req = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="Write a long story about a lighthouse keeper.",
        max_output_tokens=64,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    beta_events: list[pb.GenerationEvent] = []
    decoding = asyncio.Event()

    async def follow_beta() -> None:  # read throughout, so beta is never a slow consumer
        async for event in stub.Generate(beta_req, metadata=auth(KEY_BETA), timeout=300):
            beta_events.append(event)
            if event.HasField("delta"):
                decoding.set()  # beta is decoding on the worker now

    beta = asyncio.create_task(follow_beta())
    await asyncio.wait_for(decoding.wait(), timeout=120)  # a bound against hangs only
    generation_id = beta_events[0].generation_id

    async def alpha(sampling: pb.SamplingParams) -> list[pb.GenerationEvent]:
        req = pb.GenerateRequest(model="smollm2-135m", prompt="Hello", max_output_tokens=8, sampling=sampling)
        req.sampling.ignore_eos = True
        return [e async for e in stub.Generate(req, metadata=auth(KEY_ALPHA), timeout=120)]

    alphas = await asyncio.gather(*(alpha(s) for s in EXTREMES))
    during = await stub.GetGeneration(
        pb.GetGenerationRequest(generation_id=generation_id), metadata=auth(KEY_BETA)
    )
    await beta

    for events in alphas:
        assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
        assert sum(len(e.delta.token_ids) for e in events if e.HasField("delta")) == 8
    assert during.state == pb.Generation.RUNNING  # alpha's requests ran beside beta's, not after it
    finished = beta_events[-1].finished
    assert finished.reason == Reason.OUTPUT_LIMIT and finished.usage_final
    assert sum(len(e.delta.token_ids) for e in beta_events if e.HasField("delta")) == 64
    after = await stub.GetGeneration(
        pb.GetGenerationRequest(generation_id=generation_id), metadata=auth(KEY_BETA)
    )
    assert after.state == pb.Generation.COMPLETED
