"""JSON <-> the API's protobuf messages, by protobuf's own JSON mapping (field names in camelCase;
snake_case is accepted too; 64-bit integers are strings; enums are their names): an HTTP request
becomes exactly the message a gRPC client would send, and is validated by the same code.

Two conveniences on POST /v1/generations, both plain rewrites before the mapping: `messages` may be
the list itself (the mapping spells it {"messages": [...]}), and `input` (the seed's example) may
stand for either input: a string is `prompt`, a list is `messages`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message

from frontend.api_errors import ApiError
from frontend.http.errors import HttpError, dumps
from frontend.refusals import InvalidRequest
from llm.v1 import generations_pb2 as pb

M = TypeVar("M", bound=Message)
MAX_PARSE_ERROR_CHARS = 300  # a parse error may quote the client's value: never more than this
REQUEST_ID_HEADERS = ("idempotency-key", "x-request-id")


def to_json(message: Message) -> dict[str, Any]:
    """The message in protobuf's JSON mapping, fields at their defaults included."""
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


def parse(doc: Any, message: M) -> M:
    """`doc` (decoded JSON) into `message`; INVALID_ARGUMENT MALFORMED_REQUEST when it does not fit."""
    if not isinstance(doc, dict):
        raise InvalidRequest("MALFORMED_REQUEST", "the request body must be a JSON object")
    try:
        return json_format.ParseDict(doc, message)
    except json_format.ParseError as e:
        raise InvalidRequest("MALFORMED_REQUEST", str(e)[:MAX_PARSE_ERROR_CHARS]) from None


def header_request_id(headers: Mapping[str, str]) -> str:
    """The request id an `Idempotency-Key` or `X-Request-Id` header names ("" when none); the two
    must agree when both are sent."""
    given = {headers[h] for h in REQUEST_ID_HEADERS if h in headers}
    if len(given) > 1:
        raise InvalidRequest(
            "CONFLICTING_REQUEST_ID", "Idempotency-Key and X-Request-Id name different request ids"
        )
    return given.pop() if given else ""


def generate_request(doc: Any, headers: Mapping[str, str]) -> tuple[pb.GenerateRequest, bool]:
    """POST /v1/generations: (the GenerateRequest, whether to stream)."""
    if not isinstance(doc, dict):
        raise InvalidRequest("MALFORMED_REQUEST", "the request body must be a JSON object")
    doc = dict(doc)
    stream = doc.pop("stream", False)
    if not isinstance(stream, bool):
        raise InvalidRequest("MALFORMED_REQUEST", "stream must be true or false")
    if "input" in doc:
        given = doc.pop("input")
        if "prompt" in doc or "messages" in doc:
            raise InvalidRequest("MALFORMED_REQUEST", "input stands for prompt or messages: send one")
        doc["prompt" if isinstance(given, str) else "messages"] = given
    if isinstance(doc.get("messages"), list):
        doc["messages"] = {"messages": doc["messages"]}
    request = parse(doc, pb.GenerateRequest())
    from_header = header_request_id(headers)
    if from_header and request.request_id and from_header != request.request_id:
        raise InvalidRequest("CONFLICTING_REQUEST_ID", "the body's requestId and the header's differ")
    request.request_id = request.request_id or from_header
    return request, stream


def non_negative(value: str | None, name: str) -> int:
    """A query parameter or header that must be a non-negative integer (0 when absent)."""
    if value is None or value == "":
        return 0
    if not (value.isascii() and value.isdigit()) or len(value) > 19:  # "²".isdigit(), but int() refuses it
        raise InvalidRequest("MALFORMED_REQUEST", f"{name} must be a non-negative integer")
    return int(value)


def generation_result(events: Iterable[pb.GenerationEvent]) -> dict[str, Any]:
    """POST /v1/generations without streaming: the generation's stream in one document."""
    doc: dict[str, Any] = {"generationId": "", "text": "", "tokenIds": []}
    text: list[str] = []
    for event in events:
        doc["generationId"] = event.generation_id
        kind = event.WhichOneof("event")
        if kind == "started":
            doc["started"] = to_json(event.started)
        elif kind == "delta":
            text.append(event.delta.text)
            doc["tokenIds"].extend(event.delta.token_ids)
            if event.delta.logprobs:  # asked for: one per token id, as in the stream's deltas
                doc.setdefault("logprobs", []).extend(to_json(lp) for lp in event.delta.logprobs)
        elif kind == "finished":
            doc["finished"] = to_json(event.finished)
    doc["text"] = "".join(text)
    return doc


def rest_event(event: pb.GenerationEvent) -> bytes:
    """One server-sent event: `id:` is its sequence (what Last-Event-ID resumes after). A delta
    carries `logprobs` only when the request asked for them."""
    doc = to_json(event)
    if "delta" in doc and not doc["delta"].get("logprobs"):
        doc["delta"].pop("logprobs", None)
    return b"id: %d\ndata: %s\n\n" % (event.sequence, dumps(doc))


def rest_error_event(error: ApiError) -> bytes:
    """The error that ended a stream after its headers went out (event type `error`)."""
    return b"event: error\ndata: %s\n\n" % dumps(HttpError(error).rest_body())
