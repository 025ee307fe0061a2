"""Structured outputs and log-probabilities over gRPC, on the real platform: a constrained generation
matches its constraint, deltas carry each token's log-probability and alternatives, a retry under the
same request id replays the same events, and every constraint the engine cannot compile is refused
INVALID_ARGUMENT with its own reason before anything runs."""

from __future__ import annotations

import json
import re
from typing import Any

import grpc
import httpx
import jsonschema
import pytest

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from tests.e2e.conftest import auth
from tests.e2e.test_errors import expect_error
from tests.e2e.test_generate import generate, text, token_ids
from tests.e2e.test_http import bearer

Reason = pb.Finished.Reason
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "temp": {"type": "integer"}},
    "required": ["city", "temp"],
    "additionalProperties": False,
}


def chat(question: str, max_output_tokens: int = 48, **fields: Any) -> pb.GenerateRequest:
    req = pb.GenerateRequest(model="smollm2-135m", max_output_tokens=max_output_tokens, **fields)
    req.messages.messages.add(role="user", content=question)
    return req


async def test_a_json_schema_constrains_the_output_and_logprobs_come_with_every_token(channel) -> None:
    req = chat(
        "What is the weather in Paris?",
        constraint=pb.OutputConstraint(json_schema=json.dumps(SCHEMA)),
        logprobs=True,
        top_logprobs=3,
    )
    events = await generate(channel, req)
    assert events[-1].finished.reason == Reason.COMPLETED
    jsonschema.validate(json.loads(text(events)), SCHEMA)
    deltas = [e.delta for e in events if e.HasField("delta") and e.delta.token_ids]
    for delta in deltas:
        assert [lp.token_id for lp in delta.logprobs] == list(delta.token_ids)
        for lp in delta.logprobs:
            assert lp.logprob <= 0.0 and len(lp.top_logprobs) == 3
            assert lp.top_logprobs[0].logprob >= lp.top_logprobs[-1].logprob
            assert lp.bytes and lp.token  # each token names its bytes and text
    every = [lp for d in deltas for lp in d.logprobs]
    assert every[-1].token_id == 2  # the end of sequence, which the text leaves out
    assert b"".join(lp.bytes for lp in every[:-1]).decode() == text(events)


@pytest.mark.parametrize(
    ("constraint", "pattern"),
    [
        (pb.OutputConstraint(regex=r"[0-9]{2}:[0-9]{2}"), r"[0-9]{2}:[0-9]{2}"),
        (
            pb.OutputConstraint(choice=pb.ChoiceConstraint(choices=["red", "green", "blue"])),
            r"red|green|blue",
        ),
        (pb.OutputConstraint(lark_grammar='start: "It is " /[a-z]+/ "."'), r"It is [a-z]+\."),
        (pb.OutputConstraint(gbnf_grammar='root ::= "x" [0-9] [0-9]'), r"x[0-9]{2}"),
        (pb.OutputConstraint(json_object=True), r"\{.*\}"),
    ],
)
async def test_each_kind_of_constraint_is_kept(
    channel, constraint: pb.OutputConstraint, pattern: str
) -> None:
    events = await generate(channel, chat("Answer.", constraint=constraint))
    if events[-1].finished.reason == Reason.COMPLETED:
        assert re.fullmatch(pattern, text(events), re.DOTALL), text(events)
    else:  # only an object may run past 48 tokens: its text is still the start of one
        assert constraint.HasField("json_object") and text(events).startswith("{")


async def test_a_retry_replays_the_same_events_and_another_constraint_conflicts(channel) -> None:
    req = chat("Pick one.", request_id="structured-replay", constraint=pb.OutputConstraint(regex="(yes|no)"))
    first = await generate(channel, req)
    again = await generate(channel, req)
    assert [e.SerializeToString() for e in again] == [e.SerializeToString() for e in first]
    assert token_ids(first)
    other = chat(
        "Pick one.", request_id="structured-replay", constraint=pb.OutputConstraint(regex="(yes|maybe)")
    )
    stub = generations_pb2_grpc.GenerationsStub(channel)
    await expect_error(
        lambda: stub.Generate(other, metadata=auth()), grpc.StatusCode.ALREADY_EXISTS, "REQUEST_ID_CONFLICT"
    )


TOO_BIG = {
    "type": "object",
    "properties": {f"k{i}": {"enum": [f"v{i}-{j}" for j in range(200)]} for i in range(200)},
}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"constraint": pb.OutputConstraint(json_schema="{not json")}, "INVALID_SCHEMA"),
        ({"constraint": pb.OutputConstraint(json_schema='{"type": "objectx"}')}, "INVALID_SCHEMA"),
        (
            {"constraint": pb.OutputConstraint(json_schema='{"dependentRequired": {"a": ["b"]}}')},
            "UNSUPPORTED_SCHEMA",
        ),
        ({"constraint": pb.OutputConstraint(json_schema=json.dumps(TOO_BIG))}, "SCHEMA_TOO_COMPLEX"),
        ({"constraint": pb.OutputConstraint(regex="(a")}, "INVALID_REGEX"),
        ({"constraint": pb.OutputConstraint(lark_grammar="start: nothing_here")}, "INVALID_GRAMMAR"),
        ({"constraint": pb.OutputConstraint(choice=pb.ChoiceConstraint())}, "INVALID_CONSTRAINT"),
        ({"constraint": pb.OutputConstraint(json_object=False)}, "INVALID_CONSTRAINT"),
        ({"top_logprobs": 21, "logprobs": True}, "INVALID_LOGPROBS"),
        ({"top_logprobs": 2}, "INVALID_LOGPROBS"),
    ],
)
async def test_a_constraint_the_engine_cannot_compile_is_refused_with_its_reason(
    channel, fields: dict[str, Any], reason: str
) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = chat("x", **fields)
    await expect_error(lambda: stub.Generate(req, metadata=auth()), grpc.StatusCode.INVALID_ARGUMENT, reason)


async def test_ignore_eos_cannot_end_a_constraint(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = chat("x", constraint=pb.OutputConstraint(regex="a+"))
    req.sampling.ignore_eos = True
    await expect_error(
        lambda: stub.Generate(req, metadata=auth()), grpc.StatusCode.INVALID_ARGUMENT, "CONFLICTING_SETTINGS"
    )


async def test_resume_replays_a_constrained_stream_and_the_prefix_cache_serves_its_prompt(channel) -> None:
    question = "Describe a city as JSON, with its name and its temperature today."
    req = chat(
        question,
        request_id="structured-resume",
        constraint=pb.OutputConstraint(json_schema=json.dumps(SCHEMA)),
    )
    first = await generate(channel, req)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    resume = pb.ResumeRequest(generation_id=first[0].generation_id, after_sequence=2)
    tail = [e async for e in stub.Resume(resume, metadata=auth())]
    assert [e.SerializeToString() for e in tail] == [e.SerializeToString() for e in first[2:]]
    again = await generate(
        channel, chat(question, constraint=pb.OutputConstraint(json_schema=json.dumps(SCHEMA)))
    )
    assert again[0].started.cached_input_tokens > 0  # the same prompt's blocks, constraint or not
    assert text(again) == text(first)  # greedy under the same constraint: the same answer


async def test_rest_takes_the_constraint_and_returns_logprobs_through_the_json_mapping(http_url: str) -> None:
    body = {
        "model": "smollm2-135m",
        "messages": [{"role": "user", "content": "Yes or no?"}],
        "maxOutputTokens": 8,
        "constraint": {"choice": {"choices": ["yes", "no"]}},
        "logprobs": True,
        "topLogprobs": 2,
    }
    async with httpx.AsyncClient(base_url=http_url, headers=bearer(), timeout=120) as client:
        done = (await client.post("/v1/generations", json=body)).json()
        refused = await client.post("/v1/generations", json={**body, "constraint": {"regex": "(a"}})
    assert done["text"] in ("yes", "no") and done["finished"]["reason"] == "COMPLETED"
    assert len(done["logprobs"]) == len(done["tokenIds"]) and len(done["logprobs"][0]["topLogprobs"]) == 2
    assert refused.status_code == 400 and refused.json()["error"]["details"][0]["reason"] == "INVALID_REGEX"
