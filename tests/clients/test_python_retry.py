"""The Python SDK's retry bookkeeping (llm_platform.retry), without a server: replayed events are
dropped, only transport failures are retried, attempts are bounded and reset by progress."""

from __future__ import annotations

import random
import socket

import grpc
import pytest
from llm_platform import ApiError, Client, Delta, Finished, RetryPolicy, Started
from llm_platform.retry import Cursor, build_request
from llm_platform.v1 import generations_pb2 as pb

BROKEN = ApiError(grpc.StatusCode.UNAVAILABLE, "Socket closed")
POLICY = RetryPolicy(max_attempts=2, initial_backoff=0.1, max_backoff=0.3, multiplier=2.0)
DEFAULTS: dict = dict(
    model="m",
    max_output_tokens=4,
    request_id=None,
    temperature=None,
    top_p=None,
    top_k=None,
    seed=None,
    stop=(),
    ignore_eos=False,
    batch=False,
)


def event(sequence: int, kind: str = "delta") -> pb.GenerationEvent:
    e = pb.GenerationEvent(generation_id="gen-1", epoch=1, sequence=sequence)
    if kind == "started":
        e.started.model_version = "m@1"
    elif kind == "finished":
        e.finished.reason = pb.Finished.OUTPUT_LIMIT
    else:
        e.delta.text = f"t{sequence}"
    return e


def cursor() -> Cursor:
    return Cursor(build_request("Hi", None, **DEFAULTS), POLICY, random.Random(7))


def test_the_request_id_is_drawn_once_and_generate_is_retried_until_an_event_arrives() -> None:
    c = cursor()
    assert c.request_id.startswith("req-") and c.resume_request() is None
    assert isinstance(c.accept(event(1, "started")), Started)
    assert c.resume_request() == pb.ResumeRequest(generation_id="gen-1", after_sequence=1)


def test_replayed_events_are_dropped_and_the_cursor_moves_forward() -> None:
    c = cursor()
    delivered = [
        c.accept(event(n, k)) for n, k in [(1, "started"), (2, "delta"), (1, "started"), (2, "delta")]
    ]
    assert [type(e) for e in delivered] == [Started, Delta, type(None), type(None)]
    finished = c.accept(event(3, "finished"))
    assert isinstance(finished, Finished) and finished.reason == "OUTPUT_LIMIT" and c.finished


def test_only_transport_failures_are_retried_and_attempts_are_bounded_until_progress() -> None:
    c = cursor()
    refused = ApiError(grpc.StatusCode.UNAVAILABLE, "busy", reason="WORKER_CAPACITY", retry_delay=1.0)
    assert c.retry_delay(refused) is None  # a server decision: the caller sees it
    assert c.retry_delay(ApiError(grpc.StatusCode.INTERNAL, "boom")) is None
    first, second = c.retry_delay(BROKEN), c.retry_delay(BROKEN)
    assert first is not None and 0.05 <= first <= 0.1 and second is not None and 0.1 <= second <= 0.2
    assert c.retry_delay(BROKEN) is None and c.reconnects == 2  # max_attempts reached
    c.accept(event(1, "started"))  # progress resets the count
    assert c.retry_delay(BROKEN) is not None and c.reconnects == 3


def test_chat_messages_and_exactly_one_input() -> None:
    request = build_request(
        None,
        [("system", "Be brief."), {"role": "user", "content": "Hi"}],
        model="m",
        max_output_tokens=4,
        request_id="mine",
        temperature=0.5,
        top_p=None,
        top_k=None,
        seed=3,
        stop=["\n"],
        ignore_eos=False,
        batch=True,
    )
    assert request.request_id == "mine" and request.tier == pb.BATCH
    assert [(m.role, m.content) for m in request.messages.messages] == [
        ("system", "Be brief."),
        ("user", "Hi"),
    ]
    assert request.sampling.seed == 3 and not request.sampling.HasField("top_p")
    with pytest.raises(ValueError):
        build_request(None, None, **DEFAULTS)


def test_a_server_that_never_answers_ends_the_call_after_the_bounded_attempts() -> None:
    with socket.socket() as s:  # bound, never listening: every connection is refused
        s.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{s.getsockname()[1]}"
        policy = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)
        with Client(target, "key", retry=policy) as client:
            stream = client.generate("Hi", max_output_tokens=2)
            with pytest.raises(ApiError) as failed:
                list(stream)
    assert failed.value.code == grpc.StatusCode.UNAVAILABLE and failed.value.is_transport_failure
    assert stream.reconnects == 3
