"""The HTTP layer's pure parts: JSON -> GenerateRequest (protobuf's JSON mapping), OpenAI requests ->
GenerateRequest, events -> OpenAI chunks, and API errors -> HTTP statuses, Retry-After and bodies.
(The app against a real platform: tests/e2e/test_http.py, test_openai.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from frontend.api_errors import ApiError
from frontend.generations.validation import validate
from frontend.http import openai, openai_answers, transcode
from frontend.http.app import HttpApi, routes
from frontend.http.errors import HttpError
from frontend.http.openapi import openapi_document
from llm.v1 import generations_pb2 as pb
from tests.refusals import Refused, refused

ROOT = Path(__file__).resolve().parents[3]


def reason(e: Refused) -> str:
    return e.value.reason


def test_the_rest_body_is_the_generate_request_in_protobufs_json_mapping() -> None:
    doc = {
        "requestId": "generation-81",
        "model": "smollm2-135m",
        "input": "Summarize this.",
        "maxOutputTokens": 600,
        "sampling": {"temperature": 0.5, "stop": ["\n"], "seed": "7"},
        "tier": "BATCH",
        "stream": True,
    }
    request, stream = transcode.generate_request(doc, {})
    assert stream is True
    assert request == pb.GenerateRequest(
        request_id="generation-81",
        model="smollm2-135m",
        prompt="Summarize this.",
        max_output_tokens=600,
        sampling=pb.SamplingParams(temperature=0.5, stop=["\n"], seed=7),
        tier=pb.BATCH,
    )
    listed, stream = transcode.generate_request(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_output_tokens": 3}, {}
    )
    assert stream is False and listed.messages.messages[0].content == "hi"


def test_a_malformed_rest_body_is_malformed_request() -> None:
    bad: object
    for bad in (
        [],
        {"bogus": 1},
        {"maxOutputTokens": "many"},
        {"stream": "yes"},
        {"input": "a", "prompt": "b"},
    ):
        with refused() as e:
            transcode.generate_request(bad, {})
        assert reason(e) == "MALFORMED_REQUEST"


def test_the_request_id_may_come_from_a_header() -> None:
    request, _ = transcode.generate_request({"model": "m"}, {"idempotency-key": "k-1"})
    assert request.request_id == "k-1"
    with refused() as e:
        transcode.generate_request({"model": "m", "requestId": "a"}, {"x-request-id": "b"})
    assert reason(e) == "CONFLICTING_REQUEST_ID"
    with refused():
        transcode.header_request_id({"idempotency-key": "a", "x-request-id": "b"})


def test_an_openai_chat_request_maps_onto_generate() -> None:
    doc = {
        "model": "smollm2-135m",
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
        ],
        "max_completion_tokens": 20,
        "temperature": 0,
        "top_p": 0.9,
        "seed": 3,
        "stop": "END",
        "stream": True,
        "stream_options": {"include_usage": True},
        "n": 1,
        "user": "ignored",
    }
    request, options = openai.chat_request(doc, "rid", 512)
    assert [(m.role, m.content) for m in request.messages.messages] == [
        ("system", "Be brief."),
        ("user", "Hi there"),
    ]
    assert request.request_id == "rid" and request.max_output_tokens == 20
    assert request.sampling == pb.SamplingParams(temperature=0.0, top_p=0.9, seed=3, stop=["END"])
    assert options.chat and options.stream and options.include_usage
    validate(request)  # and the shared validation accepts it


def test_openai_defaults_are_openais() -> None:
    request, options = openai.completion_request({"model": "m", "prompt": ["once"]}, "", 77)
    assert request.prompt == "once" and request.max_output_tokens == 77
    assert request.sampling.temperature == 1.0 and not request.sampling.HasField("top_p")
    assert not options.stream and not options.chat


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"tools": [{"type": "function"}]}, "tools"),  # a completion has no tool calls
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"logit_bias": {"1": 5}}, "logit_bias"),
        ({"response_format": {"type": "grammar"}}, "response_format"),
        ({"best_of": 3}, "best_of"),
        ({"echo": True}, "echo"),
    ],
)
def test_what_the_platform_does_not_do_is_refused_by_name(extra: dict[str, object], param: str) -> None:
    with refused() as e:
        openai.completion_request({"model": "m", "prompt": "p", **extra}, "", 16)
    assert reason(e) == "UNSUPPORTED_PARAMETER" and e.value.metadata["field"] == param
    body = HttpError(e.value).openai_body()["error"]
    assert body["param"] == param and body["type"] == "invalid_request_error"


def test_badly_typed_openai_parameters_are_invalid() -> None:
    for extra in ({"max_tokens": "ten"}, {"temperature": "hot"}, {"seed": -1}, {"stop": [1]}, {"stream": 1}):
        with refused() as e:
            openai.completion_request({"model": "m", "prompt": "p", **extra}, "", 16)
        assert reason(e) == "INVALID_PARAMETER"
    with refused() as e:
        openai.completion_request({"model": "m", "prompt": [1, 2]}, "", 16)
    assert reason(e) == "UNSUPPORTED_PARAMETER"
    with refused():
        openai.chat_request({"model": "m", "messages": [], "stream_options": {"include_usage": True}}, "", 16)


def events(generation_id: str = "g1") -> list[pb.GenerationEvent]:
    usage = pb.TokenUsage(input_tokens=5, cached_input_tokens=2, output_tokens=2, delivered_output_tokens=2)
    return [
        pb.GenerationEvent(generation_id=generation_id, sequence=1, started=pb.Started(model_version="m@1")),
        pb.GenerationEvent(
            generation_id=generation_id, sequence=2, delta=pb.Delta(text="Hel", token_ids=[1])
        ),
        pb.GenerationEvent(generation_id=generation_id, sequence=3, delta=pb.Delta(text="", token_ids=[2])),
        pb.GenerationEvent(generation_id=generation_id, sequence=4, delta=pb.Delta(text="lo", token_ids=[])),
        pb.GenerationEvent(generation_id=generation_id, sequence=5, usage=pb.UsageUpdate(usage=usage)),
        pb.GenerationEvent(
            generation_id=generation_id,
            sequence=6,
            finished=pb.Finished(reason=pb.Finished.Reason.OUTPUT_LIMIT, usage=usage, usage_final=True),
        ),
    ]


def sse_data(frames: bytes) -> list[object]:
    return [
        line.removeprefix(b"data: ").decode() if line == b"data: [DONE]" else json.loads(line[6:])
        for line in frames.split(b"\n")
        if line.startswith(b"data: ")
    ]


def test_events_become_openai_chat_chunks() -> None:
    options = openai.Options(chat=True, stream=True, include_usage=True, token_ids=False, created=1)
    chunks = openai_answers.Chunks(options)
    out = sse_data(b"".join(chunks.event(e) for e in events()) + chunks.end())
    assert out[-1] == "[DONE]"
    docs = [d for d in out if isinstance(d, dict)]
    assert {d["id"] for d in docs} == {"chatcmpl-g1"} and {d["model"] for d in docs} == {"m@1"}
    assert docs[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [d["choices"][0]["delta"].get("content") for d in docs[1:3]] == ["Hel", "lo"]  # no empty text
    assert docs[3]["choices"][0]["finish_reason"] == "length"
    assert docs[4]["choices"] == [] and docs[4]["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "total_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 2},
    }


def test_events_become_completion_chunks_with_token_ids_and_a_document() -> None:
    options = openai.Options(chat=False, stream=True, include_usage=False, token_ids=True, created=1)
    chunks = openai_answers.Chunks(options)
    docs = [d for d in sse_data(b"".join(chunks.event(e) for e in events())) if isinstance(d, dict)]
    assert [d["choices"][0]["token_ids"] for d in docs] == [[1], [2], [], []]
    assert "".join(d["choices"][0]["text"] for d in docs) == "Hello" and "usage" not in docs[0]
    doc = openai_answers.document(options, events())
    assert doc["id"] == "cmpl-g1" and doc["choices"][0]["text"] == "Hello"
    assert doc["choices"][0]["token_ids"] == [1, 2] and doc["usage"]["total_tokens"] == 7


def test_finish_reasons() -> None:
    R = pb.Finished.Reason
    reasons = (R.COMPLETED, R.STOP_SEQUENCE, R.OUTPUT_LIMIT, R.CANCELED)
    assert [openai_answers.finish_reason(r) for r in reasons] == ["stop", "stop", "length", "canceled"]


def test_the_rest_stream_and_document() -> None:
    frame = transcode.rest_event(events()[1])
    assert frame.startswith(b"id: 2\ndata: ") and frame.endswith(b"\n\n")
    assert json.loads(frame.split(b"data: ")[1])["delta"] == {"text": "Hel", "tokenIds": [1]}
    doc = transcode.generation_result(events())
    assert doc["text"] == "Hello" and doc["tokenIds"] == [1, 2]
    assert doc["finished"]["reason"] == "OUTPUT_LIMIT" and doc["started"]["modelVersion"] == "m@1"


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ApiError(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SAMPLING", "x"), 400),
        (ApiError(grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", "x"), 401),
        (ApiError(grpc.StatusCode.PERMISSION_DENIED, "NOT_A_TENANT", "x"), 403),
        (ApiError(grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND", "x"), 404),
        (ApiError(grpc.StatusCode.ALREADY_EXISTS, "REQUEST_ID_CONFLICT", "x"), 409),
        (ApiError(grpc.StatusCode.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED", "x", retry_after_s=1.0), 429),
        (ApiError(grpc.StatusCode.UNAVAILABLE, "QUEUE_DEADLINE", "x", retry_after_s=2.0), 503),
        (ApiError(grpc.StatusCode.OUT_OF_RANGE, "CURSOR_EXPIRED", "x"), 400),
        (ApiError(grpc.StatusCode.INTERNAL, "INTERNAL", "x"), 500),
    ],
)
def test_errors_map_to_conventional_statuses(error: ApiError, status: int) -> None:
    e = HttpError(error)
    assert e.status == status
    body = e.rest_body()["error"]
    assert body["code"] == status and body["reason"] == error.reason and body["status"] == error.code.name
    assert (
        body["details"][0]["@type"].endswith("google.rpc.ErrorInfo")
        and body["details"][0]["reason"] == error.reason
    )
    assert e.openai_body()["error"]["code"] == error.reason
    headers = e.headers()
    if error.retry_after_s is not None:  # jittered up to 50% above the base, as on gRPC
        assert error.retry_after_s <= int(headers["retry-after-ms"]) / 1000 <= error.retry_after_s * 1.5
        assert int(headers["retry-after"]) >= error.retry_after_s
    else:
        assert "retry-after" not in headers
    assert ("www-authenticate" in headers) == (status == 401)


def test_a_quota_that_never_fits_says_not_to_retry() -> None:
    e = HttpError(ApiError(grpc.StatusCode.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED", "over the whole limit"))
    assert e.headers()["x-should-retry"] == "false"


def test_the_checked_in_openapi_document_is_the_apps() -> None:
    document = openapi_document(routes(HttpApi.__new__(HttpApi)))
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert document == checked_in, "regenerate: python -m frontend.http.openapi > docs/openapi.json"
    operations = {op["operationId"] for path in document["paths"].values() for op in path.values()}
    assert len(operations) == 17
    schemas = document["components"]["schemas"]
    for message in (pb.GenerateRequest, pb.GenerationEvent, pb.Generation, pb.SamplingParams):
        assert set(schemas[message.DESCRIPTOR.full_name]["properties"]) == {
            f.json_name for f in message.DESCRIPTOR.fields
        }
    assert schemas["llm.v1.TokenUsage"]["properties"]["inputTokens"]["type"] == "string"  # uint64
