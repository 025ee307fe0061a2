"""The OpenAI-compatible endpoints, driven by the official `openai` client unchanged (AsyncOpenAI
with base_url = the HTTP listener's /v1): chat and completions, streaming and not, usage in the
stream, idempotent retries by Idempotency-Key, and the client's own error types for 400, 401 and
429 (raised from the same reasons as gRPC's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from llm.v1 import generations_pb2 as pb
from tests.e2e.conftest import KEY_ALPHA, KEY_GAMMA
from tests.e2e.test_generate import generate, text, token_ids

MODEL = "smollm2-135m"
QUESTION: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Name three primary colours."}]


def client_for(http_url: str, key: str = KEY_ALPHA) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{http_url}/v1", api_key=key, max_retries=0, timeout=120)


@pytest.fixture
async def client(http_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    c = client_for(http_url)
    yield c
    await c.close()


def chat_request(max_output_tokens: int) -> pb.GenerateRequest:
    req = pb.GenerateRequest(model=MODEL, max_output_tokens=max_output_tokens)
    for m in QUESTION:
        req.messages.messages.add(role=m["role"], content=str(m["content"]))
    return req


async def test_greedy_chat_equals_grpc_and_streams_the_same_text(client, channel) -> None:
    over_grpc = await generate(channel, chat_request(40))
    done = await client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=40, temperature=0)
    choice = done.choices[0]
    assert choice.message.role == "assistant" and choice.message.content == text(over_grpc)
    finished = over_grpc[-1].finished
    assert choice.finish_reason == ("stop" if finished.reason == pb.Finished.Reason.COMPLETED else "length")
    assert done.usage is not None
    assert done.usage.prompt_tokens == over_grpc[0].started.input_tokens
    assert done.usage.completion_tokens == len(token_ids(over_grpc))
    assert done.id.startswith("chatcmpl-") and done.model == over_grpc[0].started.model_version
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        max_completion_tokens=40,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == choice.finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == done.usage.completion_tokens


async def test_greedy_completion_equals_grpc_token_for_token(client, channel) -> None:
    prompt = "def fibonacci(n):"
    over_grpc = await generate(channel, pb.GenerateRequest(model=MODEL, prompt=prompt, max_output_tokens=24))
    done = await client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=24, temperature=0, extra_body={"return_token_ids": True}
    )
    choice = done.choices[0]
    assert choice.text == text(over_grpc) and choice.finish_reason == "length"
    assert choice.model_extra is not None and choice.model_extra["token_ids"] == token_ids(over_grpc)
    stream = await client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=24,
        temperature=0,
        stream=True,
        extra_body={"return_token_ids": True},
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].text for c in chunks) == choice.text
    streamed_ids = [t for c in chunks for t in (c.choices[0].model_extra or {}).get("token_ids", [])]
    assert streamed_ids == token_ids(over_grpc)


async def test_stop_and_seed_are_honoured(client) -> None:
    stopped = await client.completions.create(
        model=MODEL, prompt="The capital of France is", max_tokens=30, temperature=0, stop="\n\n"
    )
    assert stopped.choices[0].text == " Paris." and stopped.choices[0].finish_reason == "stop"
    kw = {"model": MODEL, "prompt": "Tell me a story about a dragon", "max_tokens": 16, "top_p": 0.95}
    first = await client.completions.create(**kw, seed=11, temperature=1.0)
    again = await client.completions.create(**kw, seed=11, temperature=1.0)
    assert first.choices[0].text == again.choices[0].text


async def test_an_idempotency_key_makes_a_retry_reattach(client) -> None:
    """Sampled (temperature 1, no seed): only re-attaching to the same generation gives the same text."""
    headers = {"Idempotency-Key": "openai-retry-1"}
    kw = {"model": MODEL, "messages": QUESTION, "max_tokens": 16, "extra_headers": headers}
    first = await client.chat.completions.create(**kw)
    retry = await client.chat.completions.create(**kw)
    assert retry.id == first.id and retry.choices[0].message.content == first.choices[0].message.content
    other = await client.chat.completions.create(
        **{**kw, "extra_headers": {"X-Request-Id": "openai-retry-2"}}
    )
    assert other.id != first.id


async def test_models_list(client) -> None:
    ids = [m.id async for m in client.models.list()]
    assert MODEL in ids


async def test_the_clients_error_types(client, http_url: str) -> None:
    wrong = client_for(http_url, "not-a-key")
    with pytest.raises(openai.AuthenticationError) as auth_error:
        await wrong.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4)
    assert auth_error.value.code == "UNAUTHENTICATED"
    await wrong.close()
    with pytest.raises(openai.BadRequestError) as bad:
        await client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4, n=2)
    assert bad.value.code == "UNSUPPORTED_PARAMETER" and bad.value.param == "n"
    with pytest.raises(openai.BadRequestError) as sampling:
        await client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4, top_p=1.5)
    assert sampling.value.code == "INVALID_SAMPLING" and sampling.value.param == "top_p"
    robot: Any = [{"role": "robot", "content": "x"}]  # no such role
    with pytest.raises(openai.BadRequestError) as role:
        await client.chat.completions.create(model=MODEL, messages=robot, max_tokens=4)
    assert role.value.code == "INVALID_MESSAGE"
    with pytest.raises(openai.NotFoundError):
        await client.get("/nowhere", cast_to=object)


async def test_a_quota_is_a_rate_limit_error(http_url: str) -> None:
    """Gamma may run one generation at a time: the second is a RateLimitError (429, Retry-After)."""
    gamma = client_for(http_url, KEY_GAMMA)
    running = await gamma.completions.create(
        model=MODEL, prompt="Count:", max_tokens=2000, stream=True, extra_body={"ignore_eos": True}
    )
    try:
        first = await anext(aiter(running))
        generation_id = first.id.removeprefix("cmpl-")
        with pytest.raises(openai.RateLimitError) as limited:
            await gamma.completions.create(model=MODEL, prompt="Hi", max_tokens=2)
        assert limited.value.code == "QUOTA_EXCEEDED"
        assert int(limited.value.response.headers["retry-after"]) >= 1
        async with httpx.AsyncClient(
            base_url=http_url, headers={"authorization": f"Bearer {KEY_GAMMA}"}
        ) as h:
            assert (await h.post(f"/v1/generations/{generation_id}:cancel")).json()["state"] == "CANCELED"
    finally:
        await running.close()
        await gamma.close()


async def test_the_benchmarks_http_target_counts_every_token(http_url: str) -> None:
    """bench serve's platform-http target (streamed /v1/completions, return_token_ids) against the
    session platform: every forced output token is counted, in order of arrival."""
    from bench.compare.targets import platform_http_target
    from bench.load.driver import Job
    from bench.load.metrics import Outcome
    from bench.load.workload import RequestSpec

    target = platform_http_target(http_url, MODEL, [KEY_ALPHA], "bench-http-test")
    try:
        job = Job(RequestSpec(0, "interactive", 0, None, 5, 20), "The capital of France is", ())
        out = Outcome(0, "interactive", 0.0, 20)
        await target.generate(job, out)
    finally:
        target.close()
    assert out.output_tokens == 20 and out.error is None
    times = [t for t, _ in out.deliveries]
    assert times == sorted(times) and len(times) >= 10
