"""Wrapping a gRPC handler's behaviour while keeping its kind and (de)serializers: what the server
interceptors (frontend/auth.py, frontend/error_map.py) do to every RPC."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

Unary = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]  # unary or stream-unary
Streaming = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]  # response-streaming


def rewrap(
    handler: grpc.RpcMethodHandler,
    unary: Callable[[Unary], Unary],
    streaming: Callable[[Streaming], Streaming],
) -> grpc.RpcMethodHandler:
    """The same handler with its function replaced by `unary(fn)` or `streaming(fn)`."""
    ser = (handler.request_deserializer, handler.response_serializer)
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
