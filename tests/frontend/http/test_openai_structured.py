"""The OpenAI endpoints' structured outputs, logprobs and tool calls as GenerateRequest fields, and
their answers: a streamed tool call's header and argument fragments, whole calls, logprobs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from frontend.http import openai
from frontend.http.openai_calls import ToolCallStream, chat_logprobs, completion_logprobs, tool_call
from frontend.http.openai_structured import ToolCalls
from llm.v1 import generations_pb2 as pb
from tests.refusals import refused

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time"}},
]


def chat(**extra: Any) -> tuple[pb.GenerateRequest, openai.Options]:
    return openai.chat_request(
        {"model": "m", "messages": [{"role": "user", "content": "x"}], **extra}, "", 16
    )


def test_response_formats_and_structured_outputs_become_constraints() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request, _ = chat(
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "A", "schema": schema, "strict": True},
        }
    )
    assert json.loads(request.constraint.json_schema) == schema
    assert chat(response_format={"type": "json_object"})[0].constraint.json_object
    assert not chat(response_format={"type": "text"})[0].HasField("constraint")
    assert chat(structured_outputs={"regex": "a+"})[0].constraint.regex == "a+"
    assert list(chat(structured_outputs={"choice": ["x", "y"]})[0].constraint.choice.choices) == ["x", "y"]
    assert chat(structured_outputs={"grammar": 'root ::= "a"'})[0].constraint.gbnf_grammar == 'root ::= "a"'
    assert chat(structured_outputs={"grammar": 'start: "a"'})[0].constraint.lark_grammar == 'start: "a"'
    completion, _ = openai.completion_request(
        {"model": "m", "prompt": "p", "structured_outputs": {"json": schema}}, "", 8
    )
    assert json.loads(completion.constraint.json_schema) == schema


def test_two_constraints_conflict() -> None:
    with refused() as e:
        chat(response_format={"type": "json_object"}, structured_outputs={"regex": "a"})
    assert (e.value.reason, e.value.message) == (
        "CONFLICTING_SETTINGS",
        "response_format and structured_outputs each constrain the output: send one",
    )


def test_logprobs_on_chat_and_on_completions() -> None:
    request, options = chat(logprobs=True, top_logprobs=4)
    assert (request.logprobs, request.top_logprobs, options.logprobs) == (True, 4, True)
    completion, options = openai.completion_request({"model": "m", "prompt": "p", "logprobs": 3}, "", 8)
    assert (completion.logprobs, completion.top_logprobs, options.logprobs) == (True, 3, True)
    for extra in ({"top_logprobs": 21}, {"logprobs": "yes"}):
        with refused() as e:
            chat(**extra)
        assert e.value.reason == "INVALID_PARAMETER"


def test_tool_choices_become_constraints_or_clear_refusals() -> None:
    named, options = chat(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert json.loads(named.constraint.json_schema) == WEATHER and options.tools == ToolCalls(
        "get_weather", ("get_weather", "get_time")
    )
    required, options = chat(tools=TOOLS, tool_choice="required")
    one_of = json.loads(required.constraint.json_schema)["anyOf"]
    assert [c["properties"]["name"] for c in one_of] == [{"const": "get_weather"}, {"const": "get_time"}]
    assert one_of[1]["properties"]["arguments"] == {"type": "object"} and options.tools is not None
    free, options = chat(tools=TOOLS, tool_choice="none")
    assert not free.HasField("constraint") and options.tools is None
    for choice, reason in (
        (None, "TOOLS_NOT_SUPPORTED"),
        ("auto", "TOOLS_NOT_SUPPORTED"),
        ({"type": "function", "function": {"name": "nope"}}, "INVALID_PARAMETER"),
        ("sometimes", "INVALID_PARAMETER"),
    ):
        with refused() as e:
            chat(tools=TOOLS, tool_choice=choice)
        assert e.value.reason == reason and e.value.metadata["field"] == "tool_choice"


@pytest.mark.parametrize("cut", [1, 3, 7])
def test_a_required_tool_calls_stream_is_its_header_then_its_arguments(cut: int) -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    stream = ToolCallStream(ToolCalls(None, ("get_weather", "get_time")), "call_1")
    deltas = [d for i in range(0, len(text), cut) for d in stream.feed(text[i : i + cut])] + stream.finish(
        True
    )
    assert deltas[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    arguments = "".join(d["function"]["arguments"] for d in deltas[1:])
    assert json.loads(arguments) == {"city": "Paris"}
    whole = tool_call(ToolCalls(None, ("get_weather",)), "call_1", text)
    assert whole["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_a_named_tool_calls_output_is_its_arguments() -> None:
    stream = ToolCallStream(ToolCalls("get_time", ("get_time",)), "call_2")
    deltas = stream.feed("") + stream.feed('{"tz": ') + stream.feed('"UTC"}') + stream.finish(True)
    assert deltas[0]["function"] == {"name": "get_time", "arguments": ""}
    assert "".join(d["function"]["arguments"] for d in deltas) == '{"tz": "UTC"}'


def test_logprobs_in_openais_shapes() -> None:
    top = [pb.TopLogprob(token_id=5, token="Hi", bytes=b"Hi", logprob=-0.1)]
    lps = [pb.TokenLogprob(token_id=5, token="Hi", bytes=b"Hi", logprob=-0.1, top_logprobs=top),
           pb.TokenLogprob(token_id=6, token=" there", bytes=b" there", logprob=-2.0)]  # fmt: skip
    content = chat_logprobs(lps)["content"]
    hi = {"token": "Hi", "logprob": pytest.approx(-0.1), "bytes": [72, 105]}
    assert content[0] == {**hi, "top_logprobs": [hi]}
    legacy = completion_logprobs(lps, 10)
    assert legacy["tokens"] == ["Hi", " there"] and legacy["text_offset"] == [10, 12]
    assert legacy["top_logprobs"][1] == {}
