"""The one error table: every domain error class has its row, quota refusals say whether a retry can
succeed, anything unexpected is a generic INTERNAL, and the interceptor applies it to every RPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status
from sqlalchemy.exc import OperationalError

from billing.errors import BillingError, BudgetExceeded, QuotaExceeded, QuotaKind
from control.errors import ApiKeyNotValid, ControlError, FencingError, GenerationNotFound, TenantDisabled
from frontend.api_errors import TABLE, ApiError, api_error, error_info
from frontend.http.errors import HttpError
from frontend.refusals import InvalidRequest
from frontend.rpc.interceptors import ErrorInterceptor
from frontend.rpc.server import CappedHealthServicer, CappedReflectionServicer
from llm.v1 import generations_pb2 as pb


def concrete_subclasses(base: type[Exception]) -> set[type[Exception]]:
    found: set[type[Exception]] = set()
    for sub in base.__subclasses__():
        found |= {sub} | concrete_subclasses(sub)
    return found - {FencingError}  # an abstract grouping: each of its subclasses has a row


@pytest.mark.parametrize("base", [ControlError, BillingError])
def test_every_domain_error_class_has_a_row(base: type[Exception]) -> None:
    missing = sorted(c.__name__ for c in concrete_subclasses(base) if c not in TABLE)
    assert missing == []


def quota(kind: QuotaKind, limit: int, requested: int, retry: timedelta | None = None) -> QuotaExceeded:
    return QuotaExceeded("acme", kind, limit, in_use=0, requested=requested, retry_after=retry)


def test_quota_refusals_carry_a_retry_only_when_one_can_succeed() -> None:
    window = api_error(quota(QuotaKind.OUTPUT_TOKENS_PER_MINUTE, 100, 50, timedelta(seconds=42)))
    load = api_error(quota(QuotaKind.CONCURRENT_GENERATIONS, 2, 1))
    never = api_error(quota(QuotaKind.QUEUED_TOKENS, 100, 500))
    assert (window.code, window.reason, window.retry_after_s) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
        42.0,
    )
    assert load.retry_after_s == 1.0
    assert never.retry_after_s is None and never.quota is not None


def test_a_budget_refusal_is_resource_exhausted_without_a_retry_and_429_over_http() -> None:
    end = datetime(2030, 2, 1, tzinfo=UTC)
    error = api_error(BudgetExceeded("tenant:acme", 3000, 1000, 1700, 1700, end))
    assert (error.code, error.reason, error.retry_after_s) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "BUDGET_EXCEEDED",
        None,
    )
    assert error.metadata == {
        "subject": "tenant:acme",
        "budget_micros": "3000",
        "period_end": end.isoformat(),
    }
    http = HttpError(error)
    assert (http.status, http.headers().get("x-should-retry")) == (429, "false")
    assert "retry-after" not in http.headers()
    assert api_error(TenantDisabled("acme")).code == grpc.StatusCode.PERMISSION_DENIED
    assert (
        api_error(ApiKeyNotValid("key_1")).code,
        HttpError(api_error(ApiKeyNotValid("key_1"))).status,
    ) == (
        grpc.StatusCode.UNAUTHENTICATED,
        401,
    )


def test_unexpected_errors_are_a_generic_internal_and_api_errors_pass_through() -> None:
    internal = api_error(RuntimeError("secret prompt text"))
    assert (internal.code, internal.reason, internal.message) == (
        grpc.StatusCode.INTERNAL,
        "INTERNAL",
        "internal error",
    )
    relayed_as_is = ApiError(grpc.StatusCode.INVALID_ARGUMENT, "BAD", "bad")  # another frontend's answer
    assert api_error(relayed_as_is) is relayed_as_is
    own = api_error(InvalidRequest("BAD", "bad", field="x"))
    assert (own.code, own.reason, own.message, own.metadata) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "BAD",
        "bad",
        {"field": "x"},
    )
    assert api_error(GenerationNotFound("g1")).code == grpc.StatusCode.NOT_FOUND


async def test_the_interceptor_maps_what_unary_and_streaming_handlers_raise() -> None:
    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise GenerationNotFound("g1")

    async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        yield b"one"
        raise RuntimeError("secret prompt text")

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
    }
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await channel.unary_unary("/t.T/Unary")(b"x")
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            status = rpc_status.from_call(e.value)
            assert status is not None and error_info(status).reason == "GENERATION_NOT_FOUND"  # type: ignore[union-attr]
            call = channel.unary_stream("/t.T/Stream")(b"x")
            assert await call.read() == b"one"
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call.read()
            assert e.value.code() == grpc.StatusCode.INTERNAL
            assert "secret" not in (e.value.details() or "")
    finally:
        await server.stop(None)


async def test_malformed_request_bytes_are_invalid_argument_and_health_watch_is_capped() -> None:
    async def unary(request: pb.GenerateRequest, context: grpc.aio.ServicerContext) -> bytes:
        return b"parsed"

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=pb.GenerateRequest.FromString, response_serializer=bytes
        )
    }
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", handlers)])
    health_servicer = CappedHealthServicer(max_watchers=2)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/t.T/Unary")
            assert await call(pb.GenerateRequest(model="m").SerializeToString()) == b"parsed"
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await call(b"\xff\xff\xff")  # not a protobuf message
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            status = rpc_status.from_call(e.value)
            assert status is not None and error_info(status).reason == "MALFORMED_REQUEST"  # type: ignore[union-attr]

            stub = health_pb2_grpc.HealthStub(channel)
            watches = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(2)]
            for w in watches:  # the stock servicer answers each watch with the overall status
                assert (await w.read()).status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await stub.Watch(health_pb2.HealthCheckRequest()).read()
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            watches[0].cancel()
            while health_servicer.watchers == 2:  # the cancelled watch leaves its slot
                await asyncio.sleep(0.01)
            third = stub.Watch(health_pb2.HealthCheckRequest())
            assert (await third.read()).status == health_pb2.HealthCheckResponse.SERVING
            third.cancel()
            watches[1].cancel()
    finally:
        await server.stop(None)


def test_a_store_that_is_down_or_locked_is_unavailable_with_a_retry_not_sql_text() -> None:
    locked = OperationalError("UPDATE generations SET state=?", {}, Exception("database is locked"))
    error = api_error(locked)
    assert (error.code, error.reason, error.retry_after_s) == (
        grpc.StatusCode.UNAVAILABLE,
        "STORE_UNAVAILABLE",
        1.0,
    )
    assert "UPDATE" not in error.message and "locked" not in error.message


async def test_server_reflection_streams_are_capped_as_health_watches_are() -> None:
    """Reflection needs no credential either: a client may not hold more streams than the cap."""
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    reflection_servicer = CappedReflectionServicer(("llm.v1.Generations",), max_streams=2)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(reflection_servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    ask = reflection_pb2.ServerReflectionRequest(list_services="")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            held = [stub.ServerReflectionInfo() for _ in range(2)]
            for stream in held:  # each answers while it is open
                await stream.write(ask)
                answer = await stream.read()
                assert [s.name for s in answer.list_services_response.service] == ["llm.v1.Generations"]
            refused = stub.ServerReflectionInfo()
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await refused.write(ask)
                await refused.read()
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            status = rpc_status.from_call(e.value)
            assert status is not None and error_info(status).reason == "TOO_MANY_REFLECTION_STREAMS"  # type: ignore[union-attr]
            await held[0].done_writing()  # a stream that ends leaves its slot
            while reflection_servicer.streams == 2:
                await asyncio.sleep(0.01)
            again = stub.ServerReflectionInfo()
            await again.write(ask)
            assert (await again.read()).list_services_response.service
            again.cancel()
            held[1].cancel()
    finally:
        await server.stop(None)
