"""Generate over real gRPC against a real Triton worker: token ids equal transformers' greedy ids,
events are ordered and numbered, and sampling, stop strings and ignore_eos are honoured."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.conftest import hf_greedy
from tests.e2e.conftest import auth
from tests.e2e.worker_metrics import HANG_S, frontend_scrape, wait_until, wait_until_idle

Reason = pb.Finished.Reason
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
]


async def assert_worker_is_free(channel: grpc.aio.Channel) -> None:
    """A small request finishes within a deadline the worker could not meet if it were still busy
    with an earlier (cancelled or refused) request."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(model="smollm2-135m", prompt="Hello", max_output_tokens=4)
    events = [e async for e in stub.Generate(req, metadata=auth(), timeout=60)]
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT


async def generate(
    channel: grpc.aio.Channel, req: pb.GenerateRequest, key: str | None = None
) -> list[pb.GenerationEvent]:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    return [e async for e in stub.Generate(req, metadata=auth(key) if key else auth())]


def token_ids(events: list[pb.GenerationEvent]) -> list[int]:
    return [t for e in events if e.HasField("delta") for t in e.delta.token_ids]


def text(events: list[pb.GenerationEvent]) -> str:
    return "".join(e.delta.text for e in events if e.HasField("delta"))


@pytest.mark.parametrize("prompt", PROMPTS)
async def test_greedy_prompt_matches_transformers(channel, platform: Platform, hf_model, prompt: str) -> None:
    events = await generate(
        channel, pb.GenerateRequest(model="smollm2-135m", prompt=prompt, max_output_tokens=24)
    )
    prompt_ids = platform.registry.resolve("smollm2-135m").tokenizer.encode(prompt)
    assert events[0].started.input_tokens == len(prompt_ids)
    assert token_ids(events) == hf_greedy(hf_model, prompt_ids, 24)


async def test_greedy_chat_matches_transformers(channel, hf_model, hf_tokenizer) -> None:
    req = pb.GenerateRequest(model="smollm2-135m", max_output_tokens=48)
    req.messages.messages.add(role="system", content="You are a concise assistant.")
    req.messages.messages.add(role="user", content="Name three primary colours.")
    events = await generate(channel, req)
    reference_prompt = hf_tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": "Name three primary colours."},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt_ids = hf_tokenizer.encode(reference_prompt, add_special_tokens=False)
    assert events[0].started.input_tokens == len(prompt_ids)
    expected = hf_greedy(hf_model, prompt_ids, 48)
    assert token_ids(events) == expected
    finished = events[-1].finished
    assert finished.reason == (Reason.COMPLETED if expected[-1] == 2 else Reason.OUTPUT_LIMIT)


async def test_events_are_ordered_and_numbered(channel, platform: Platform) -> None:
    events = await generate(
        channel,
        pb.GenerateRequest(
            model="smollm2-135m",
            prompt="The capital of France is",
            max_output_tokens=12,
            request_id="order-1",
        ),
    )
    version = platform.registry.resolve("smollm2-135m")
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert {e.generation_id for e in events} == {events[0].generation_id} and events[0].generation_id
    assert {e.epoch for e in events} == {1}
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "started" and kinds[-2:] == ["usage", "finished"]
    assert set(kinds[1:-2]) == {"delta"}
    started = events[0].started
    assert started.model_version == version.version_id and started.request_id == "order-1"
    finished = events[-1].finished
    assert finished.reason == Reason.OUTPUT_LIMIT and finished.usage_final
    ids = token_ids(events)
    assert len(ids) == 12
    assert finished.usage.output_tokens == finished.usage.delivered_output_tokens == 12
    assert finished.usage.input_tokens == started.input_tokens == 5
    assert events[-2].usage.usage == finished.usage
    assert text(events) == version.tokenizer.decode(ids)


async def test_end_of_sequence_completes(channel) -> None:
    req = pb.GenerateRequest(model="smollm2-135m", max_output_tokens=64)
    req.messages.messages.add(role="user", content="What is 2+2?")
    events = await generate(channel, req)
    assert events[-1].finished.reason == Reason.COMPLETED
    assert token_ids(events)[-1] == 2
    assert "<|im_end|>" not in text(events)


async def test_ignore_eos_generates_exactly_max_output_tokens(channel) -> None:
    req = pb.GenerateRequest(
        model="smollm2-135m", max_output_tokens=40, sampling=pb.SamplingParams(ignore_eos=True)
    )
    req.messages.messages.add(role="user", content="What is 2+2?")
    events = await generate(channel, req)
    assert len(token_ids(events)) == 40
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT


async def test_stop_sequence_ends_before_the_stop_string(channel) -> None:
    req = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="The capital of France is",
        max_output_tokens=30,
        sampling=pb.SamplingParams(stop=["\n\n"]),
    )
    events = await generate(channel, req)
    assert text(events) == " Paris."
    assert events[-1].finished.reason == Reason.STOP_SEQUENCE
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))


async def test_seeded_sampling_is_reproducible(channel) -> None:
    def req(seed: int) -> pb.GenerateRequest:
        return pb.GenerateRequest(
            model="smollm2-135m",
            prompt="Tell me a story about a dragon",
            max_output_tokens=16,
            sampling=pb.SamplingParams(temperature=1.0, top_p=0.95, top_k=50, seed=seed, ignore_eos=True),
        )

    first = token_ids(await generate(channel, req(11)))
    again = token_ids(await generate(channel, req(11)))
    other = token_ids(await generate(channel, req(12)))
    assert first == again and len(first) == 16
    assert first != other


async def test_pinned_version_id_is_accepted(channel, platform: Platform) -> None:
    version_id = platform.registry.resolve("smollm2-135m").version_id
    events = await generate(
        channel, pb.GenerateRequest(model=version_id, prompt="Hello", max_output_tokens=3)
    )
    assert events[0].started.model_version == version_id
    assert len(token_ids(events)) == 3


async def test_client_cancel_stops_the_worker_request(channel, platform: Platform) -> None:
    """A cancelled stream ends its worker request at the next step: the sequence leaves the batch
    and its KV blocks return to the pool (it asked for 6,000 tokens, minutes of work here)."""
    stub = generations_pb2_grpc.GenerationsStub(channel)
    long = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="Count:",
        max_output_tokens=6000,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    call = stub.Generate(long, metadata=auth())
    seen = 0
    async for event in call:
        seen += event.HasField("delta")
        if seen == 3:
            break
    busy = await wait_until(platform, lambda m: m.get("llm_worker_sequences:running", 0) >= 1)
    assert busy["llm_worker_sequences:running"] >= 1  # the long request is in the batch
    lag = 'llm_cancellation_lag_seconds_count{reason="DISCONNECTED"}'
    before = frontend_scrape(platform).get(lag, 0.0)
    call.cancel()  # and nobody resumes it: cancelled after the grace period
    idle = await wait_until_idle(platform)
    assert idle["llm_worker_sequences:running"] == 0
    assert idle["llm_worker_kv_blocks:used"] == 0
    # recorded as a disconnect once the run has ended (its seal comes after the worker freed it)
    async with asyncio.timeout(HANG_S):
        while frontend_scrape(platform).get(lag, 0.0) == before:
            await asyncio.sleep(0.1)
    assert frontend_scrape(platform)[lag] == before + 1
    await assert_worker_is_free(channel)
