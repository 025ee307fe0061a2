"""Structured outputs, logprobs and tool calls through clients nobody here wrote: the official
`openai` package (response_format with a json_schema, `chat.completions.parse` with a pydantic model,
logprobs, named and required tool calls, streamed included) and the Python SDK over gRPC."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import openai
import pytest
from llm_platform import AsyncClient, Delta, Finished, choice, json_schema
from pydantic import BaseModel, Field

from tests.e2e.conftest import KEY_SDK
from tests.e2e.test_openai import MODEL, client_for

CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "population": {"type": "integer", "minimum": 0, "maximum": 99999999},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}
ASK: Any = [{"role": "user", "content": "Tell me about Paris."}]
TOOLS: Any = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
        "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"],
        "additionalProperties": False}}},
]  # fmt: skip


@pytest.fixture
async def client(http_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    c = client_for(http_url)
    yield c
    await c.close()


class City(BaseModel):
    city: str = Field(max_length=20)
    population: int = Field(ge=0, le=99999999)


async def test_response_format_json_schema_and_parse_with_a_pydantic_model(
    client: openai.AsyncOpenAI,
) -> None:
    done = await client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        max_tokens=48,
        temperature=0,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "city", "schema": CITY, "strict": True},
        },
    )
    assert done.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(done.choices[0].message.content or ""), CITY)
    parsed = await client.chat.completions.parse(
        model=MODEL,
        messages=ASK,
        max_tokens=48,
        temperature=0,
        response_format=City,
    )
    assert isinstance(parsed.choices[0].message.parsed, City)


async def test_logprobs_on_chat_and_completions(client: openai.AsyncOpenAI) -> None:
    done = await client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        max_tokens=8,
        temperature=0,
        logprobs=True,
        top_logprobs=2,
    )
    assert done.choices[0].logprobs is not None
    content = done.choices[0].logprobs.content or []
    assert done.usage is not None and len(content) == done.usage.completion_tokens
    assert all(c.logprob <= 0 and len(c.top_logprobs) == 2 for c in content)
    assert all(c.top_logprobs[0].logprob >= c.logprob for c in content)  # greedy: the best is drawn
    assert (
        b"".join(bytes(c.bytes or []) for c in content)
        .decode(errors="replace")
        .startswith((done.choices[0].message.content or "")[:4])
    )
    legacy = await client.completions.create(
        model=MODEL, prompt="The sky is", max_tokens=4, temperature=0, logprobs=3
    )
    lp = legacy.choices[0].logprobs
    assert lp is not None and len(lp.tokens or []) == 4 and all(len(t) == 3 for t in lp.top_logprobs or [])


async def test_a_named_tool_call_returns_valid_arguments(client: openai.AsyncOpenAI) -> None:
    named: Any = {"type": "function", "function": {"name": "get_weather"}}
    done = await client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        max_tokens=48,
        temperature=0,
        tools=TOOLS,
        tool_choice=named,
    )
    message = done.choices[0].message
    assert done.choices[0].finish_reason == "tool_calls" and message.content is None
    call = (message.tool_calls or [])[0]
    assert call.type == "function" and call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), TOOLS[0]["function"]["parameters"])


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
async def test_a_streamed_tool_call_arrives_as_json_fragments(
    client: openai.AsyncOpenAI, tool_choice: Any
) -> None:
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        max_tokens=48,
        temperature=0,
        tools=TOOLS,
        tool_choice=tool_choice,
        stream=True,
    )
    names, fragments, reasons = [], [], []
    async for chunk in stream:
        for c in chunk.choices:
            for call in c.delta.tool_calls or []:
                if call.function and call.function.name:
                    names.append(call.function.name)
                if call.function and call.function.arguments:
                    fragments.append(call.function.arguments)
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert reasons == ["tool_calls"] and len(names) == 1
    parameters = next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == names[0])
    jsonschema.validate(json.loads("".join(fragments)), parameters)


async def test_auto_tool_choice_is_a_clear_400(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        await client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=8, tools=TOOLS)
    assert e.value.code == "TOOLS_NOT_SUPPORTED"


async def test_the_python_sdk_over_grpc(frontend_port: int) -> None:
    async with AsyncClient(f"127.0.0.1:{frontend_port}", KEY_SDK) as sdk:
        stream = sdk.generate(
            messages=ASK, max_output_tokens=48, constraint=json_schema(CITY), logprobs=True, top_logprobs=1
        )
        events = [e async for e in stream]
        deltas = [e for e in events if isinstance(e, Delta)]
        assert isinstance(events[-1], Finished) and events[-1].reason == "COMPLETED"
        jsonschema.validate(json.loads("".join(d.text for d in deltas)), CITY)
        assert all(len(d.logprobs) == len(d.token_ids) for d in deltas)
        picked = [
            e async for e in sdk.generate("Colour:", max_output_tokens=8, constraint=choice(["red", "blue"]))
        ]
        assert "".join(e.text for e in picked if isinstance(e, Delta)) in ("red", "blue")
