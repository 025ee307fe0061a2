"""Wrapping a gRPC handler's behaviour while keeping its kind and (de)serializers: what the server
interceptors (frontend/auth.py, frontend/api_errors.py) do to every RPC."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

Parser = Callable[[bytes], Any]  # a request message's deserializer
Unary = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]  # unary or stream-unary
# response-streaming: yields its responses, or writes them to its context (the stock Health.Watch)
Streaming = Callable[[Any, grpc.aio.ServicerContext], Any]


async def responses(result: Any) -> AsyncIterator[Any]:
    """A streaming handler's responses, whether it yields them or writes them itself."""
    if inspect.isawaitable(result):
        await result
        return
    async for item in result:
        yield item


def rewrap(
    handler: grpc.RpcMethodHandler,
    unary: Callable[[Unary], Unary],
    streaming: Callable[[Streaming], Streaming],
    parse: Callable[[Parser], Parser] | None = None,
) -> grpc.RpcMethodHandler:
    """The same handler with its function replaced by `unary(fn)` or `streaming(fn)`, and its request
    parser by `parse(parser)` when given."""
    deserializer = handler.request_deserializer
    if parse is not None and deserializer is not None:
        deserializer = parse(deserializer)
    ser = (deserializer, handler.response_serializer)
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), *ser)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), *ser)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), *ser)
    return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), *ser)


class HandlerInterceptor(grpc.aio.ServerInterceptor):
    """A server interceptor that rewraps every handler it is given (`wrap`)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        return handler if handler is None else self.wrap(handler, details)

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        raise NotImplementedError


class Malformed:
    """Stands for a request message whose bytes did not parse (the handler refuses it)."""


MALFORMED = Malformed()


def tolerant(parse: Parser) -> Parser:
    """A parser that returns MALFORMED instead of raising (which gRPC would answer with UNKNOWN)."""

    def parse_or_mark(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception:
            return MALFORMED

    return parse_or_mark
