"""The one error table: every domain error class has its row, quota refusals say whether a retry can
succeed, anything unexpected is a generic INTERNAL, and the interceptor applies it to every RPC."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest
from grpc_status import rpc_status

from billing.errors import BillingError, QuotaExceeded, QuotaKind
from control.errors import ControlError, FencingError, GenerationNotFound
from frontend.error_map import TABLE, ErrorInterceptor, api_error
from frontend.errors import error_info, invalid_argument


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


def test_unexpected_errors_are_a_generic_internal_and_api_errors_pass_through() -> None:
    internal = api_error(RuntimeError("secret prompt text"))
    assert (internal.code, internal.reason, internal.message) == (
        grpc.StatusCode.INTERNAL,
        "INTERNAL",
        "internal error",
    )
    own = invalid_argument("BAD", "bad")
    assert api_error(own) is own
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
