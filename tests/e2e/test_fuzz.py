"""Protobuf fuzzing of every request message over the real frontend (issue 12): hypothesis builds
messages field by field from the descriptors (unknown enum values, NaN and infinite floats, huge and
negative integers, out-of-range timestamps, long strings) and raw bytes that may not parse at all.
No answer may be UNKNOWN or INTERNAL, and health stays SERVING."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm.v1 import account_pb2, admin_pb2, generations_pb2, models_pb2, usage_pb2
from tests.e2e.conftest import KEY_ADMIN, KEY_FUZZ

SERVICES = [
    generations_pb2.DESCRIPTOR.services_by_name["Generations"],
    models_pb2.DESCRIPTOR.services_by_name["Models"],
    usage_pb2.DESCRIPTOR.services_by_name["Usage"],
    admin_pb2.DESCRIPTOR.services_by_name["Admin"],
    account_pb2.DESCRIPTOR.services_by_name["Account"],
]
METHODS = [m for s in SERVICES for m in s.methods]
# Admin's tenancy calls with the admin key: tenants and keys of their own (random ids), never the
# session's prices (SetModelPrice would price the session's model for the other tests)
TENANCY_CALLS = {
    "CreateTenant", "UpdateTenant", "ListTenants", "CreateApiKey", "ListApiKeys", "UpdateApiKey",
    "RevokeApiKey", "RotateApiKey", "ListTenantChanges", "ListModelPrices", "ExportUsage",
    "ListGenerations",
}  # fmt: skip
TENANCY = [m for m in admin_pb2.DESCRIPTOR.services_by_name["Admin"].methods if m.name in TENANCY_CALLS]
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
CALL_TIMEOUT_S = 60.0  # generous: a hang fails, a slow machine does not
F = FieldDescriptor
INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
}
TEXT = st.one_of(
    st.sampled_from(["", "smollm2-135m", "smollm2-135m@nope", "user", "assistant"]),
    st.text(max_size=40),
    st.integers(1000, 200_000).map(lambda n: "x" * n),
)


def scalar(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.type in INTS:
        low, high = INTS[field.type]
        return st.one_of(st.integers(low, high), st.integers(-3, 40).filter(lambda v: low <= v <= high))
    if field.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32 if field.type == F.TYPE_FLOAT else 64)
    if field.type == F.TYPE_BOOL:
        return st.booleans()
    if field.type == F.TYPE_ENUM:
        return st.integers(-2, 12)  # open enums: unknown values too
    if field.type == F.TYPE_BYTES:
        return st.binary(max_size=32)
    return TEXT


def message(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """A message of `descriptor` with a random subset of its fields set."""
    cls = GetMessageClass(descriptor)
    fields = [f for f in descriptor.fields if f.type != F.TYPE_MESSAGE or depth < 3]

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        msg = cls()
        for field in fields:
            if not draw(st.booleans()):
                continue
            if field.type == F.TYPE_MESSAGE:
                values = draw(st.lists(message(field.message_type, depth + 1), max_size=3))
                if field.label == F.LABEL_REPEATED:
                    getattr(msg, field.name).extend(values)
                elif values:
                    getattr(msg, field.name).CopyFrom(values[0])
            elif field.label == F.LABEL_REPEATED:
                getattr(msg, field.name).extend(draw(st.lists(scalar(field), max_size=3)))
            else:
                setattr(msg, field.name, draw(scalar(field)))
        return msg

    return build()


def payload(method: MethodDescriptor) -> st.SearchStrategy[bytes]:
    valid = message(method.input_type).map(lambda m: m.SerializeToString())
    return st.one_of(valid, valid, st.binary(max_size=64))  # sometimes bytes that do not parse


def call(
    channel: grpc.Channel, method: MethodDescriptor, body: bytes, key: str = KEY_FUZZ
) -> grpc.StatusCode:
    """Sends `body` to the method and returns the status (a stream is read to its first answer)."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    metadata = (("authorization", f"Bearer {key}"),)
    try:
        if method.server_streaming:
            if method.client_streaming:
                stream = channel.stream_stream(path)(iter([body]), metadata=metadata, timeout=CALL_TIMEOUT_S)
            else:
                stream = channel.unary_stream(path)(body, metadata=metadata, timeout=CALL_TIMEOUT_S)
            next(stream, None)  # the first event or the end; then leave (the run is cancelled)
            stream.cancel()
            return grpc.StatusCode.OK
        channel.unary_unary(path)(body, metadata=metadata, timeout=CALL_TIMEOUT_S)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def fuzz(
    port: int, methods: list[MethodDescriptor] = METHODS, key: str = KEY_FUZZ, examples: int = 240
) -> list[tuple[str, grpc.StatusCode]]:
    seen: list[tuple[str, grpc.StatusCode]] = []
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:

        @settings(
            max_examples=examples, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
        )
        @given(st.data())
        def one(data: st.DataObject) -> None:
            method = data.draw(st.sampled_from(methods))
            code = call(channel, method, data.draw(payload(method)), key)
            seen.append((method.name, code))
            assert code not in FORBIDDEN, f"{method.name} answered {code.name}"

        one()
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=CALL_TIMEOUT_S
        )
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    return seen


async def test_no_request_message_gets_unknown_or_internal(frontend_port: int) -> None:
    seen = await asyncio.to_thread(fuzz, frontend_port)
    assert {name for name, _ in seen} >= {"Generate", "Resume", "GetGeneration", "CancelGeneration"}
    assert grpc.StatusCode.INVALID_ARGUMENT in {code for _, code in seen}


async def test_no_tenancy_request_of_an_operator_gets_unknown_or_internal(frontend_port: int) -> None:
    seen = await asyncio.to_thread(fuzz, frontend_port, TENANCY, KEY_ADMIN, 120)
    codes = {code for _, code in seen}
    assert grpc.StatusCode.INVALID_ARGUMENT in codes and grpc.StatusCode.NOT_FOUND in codes
