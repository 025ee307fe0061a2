"""Every invalid GenerateRequest maps to INVALID_ARGUMENT with a precise reason."""

from __future__ import annotations

import grpc
import pytest

from contracts.sampling import GREEDY_BELOW_TEMPERATURE
from frontend.catalog.tokenization import Message
from frontend.generations.validation import GenerationParams, check_context, check_for_version, validate
from llm.v1 import generations_pb2 as pb
from tests.refusals import refused


def request(**overrides: object) -> pb.GenerateRequest:
    req = pb.GenerateRequest(model="smollm2-135m", prompt="hi", max_output_tokens=8)
    for key, value in overrides.items():
        if key == "sampling":
            req.sampling.CopyFrom(value)
        else:
            setattr(req, key, value)
    return req


def reason_of(req: pb.GenerateRequest) -> str:
    with refused() as e:
        validate(req)
    assert e.value.code is grpc.StatusCode.INVALID_ARGUMENT
    return e.value.reason


def test_valid_request_gets_defaults() -> None:
    v = validate(request())
    assert v.prompt == "hi" and v.messages is None
    assert v.params == GenerationParams(max_output_tokens=8)
    assert v.tier == pb.INTERACTIVE


def test_chat_messages_are_kept_in_order() -> None:
    req = request()
    req.messages.messages.add(role="system", content="be brief")
    req.messages.messages.add(role="user", content="hello")
    v = validate(req)
    assert v.prompt is None
    assert [(m.role, m.content) for m in v.messages or ()] == [("system", "be brief"), ("user", "hello")]


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"max_output_tokens": 0}, "INVALID_MAX_OUTPUT_TOKENS"),
        ({"max_output_tokens": -3}, "INVALID_MAX_OUTPUT_TOKENS"),
        ({"model": ""}, "MISSING_MODEL"),
        ({"prompt": ""}, "EMPTY_INPUT"),
        ({"request_id": "x" * 129}, "INVALID_REQUEST_ID"),
        ({"tier": 7}, "INVALID_TIER"),
        ({"sampling": pb.SamplingParams(temperature=-0.1)}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(temperature=2.5)}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(temperature=float("nan"))}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(temperature=float("inf"))}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(temperature=float("-inf"))}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(top_p=float("nan"))}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(top_p=float("inf"))}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(top_p=float("-inf"))}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(top_p=0.0)}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(top_p=1.5)}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(top_k=-1)}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(stop=[""])}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(stop=["x"] * 9)}, "INVALID_SAMPLING"),
        ({"sampling": pb.SamplingParams(stop=["x" * 257])}, "INVALID_SAMPLING"),
    ],
)
def test_invalid_settings(overrides: dict[str, object], reason: str) -> None:
    assert reason_of(request(**overrides)) == reason


@pytest.mark.parametrize("temperature", [1e-45, 1e-30, 1e-4, 0.000999])
def test_a_temperature_below_the_floor_is_greedy(temperature: float) -> None:
    v = validate(request(sampling=pb.SamplingParams(temperature=temperature, seed=3)))
    assert v.params.temperature == 0.0 and v.params.seed == 3


def test_a_temperature_at_the_floor_or_above_is_kept() -> None:
    for temperature in (GREEDY_BELOW_TEMPERATURE, 0.5, 2.0):
        v = validate(request(sampling=pb.SamplingParams(temperature=temperature)))
        assert v.params.temperature == pytest.approx(temperature)  # a proto float: fp32


def test_missing_input_is_invalid() -> None:
    assert reason_of(pb.GenerateRequest(model="m", max_output_tokens=1)) == "EMPTY_INPUT"


def test_empty_message_list_and_bad_role_are_invalid() -> None:
    req = request()
    req.messages.SetInParent()
    assert reason_of(req) == "EMPTY_INPUT"
    req.messages.messages.add(role="robot", content="x")
    assert reason_of(req) == "INVALID_MESSAGE"


def test_a_tool_result_is_a_message() -> None:
    req = request()
    req.messages.messages.add(role="tool", content='{"temp": 21}')
    assert validate(req).messages == (Message("tool", '{"temp": 21}'),)


def test_sampling_error_names_the_field() -> None:
    with refused() as e:
        validate(request(sampling=pb.SamplingParams(top_p=2.0)))
    assert e.value.metadata == {"field": "top_p"}


def test_top_k_over_vocabulary_is_invalid() -> None:
    with refused() as e:
        check_for_version(GenerationParams(max_output_tokens=1, top_k=50_000), vocab_size=49_152)
    assert e.value.reason == "INVALID_SAMPLING"
    check_for_version(GenerationParams(max_output_tokens=1, top_k=49_152), vocab_size=49_152)


def test_context_bound() -> None:
    check_context(8000, 192, 8192)
    with refused() as e:
        check_context(8000, 193, 8192)
    assert e.value.reason == "CONTEXT_LENGTH_EXCEEDED"
    assert e.value.metadata == {"prompt_tokens": "8000", "context_length": "8192"}
    with refused() as e:
        check_context(0, 1, 8192)
    assert e.value.reason == "EMPTY_INPUT"
