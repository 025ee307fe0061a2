"""The internal relay: Resume and Cancel forwarded by other frontends (frontend/fleet/relay_client.py) for
the generations this frontend runs, on a listener of its own ([fleet] relay_listen), never the
public one.

    llm.internal.v1.Relay/Resume   ResumeRequest -> stream GenerationEvent   (this frontend's log)
    llm.internal.v1.Relay/Cancel   CancelGenerationRequest -> Generation     (this frontend's runs)

A call needs the relay credential (derived from [fleet] frontend_key, not a tenant's key) and names
the tenant its caller authenticated; every tenant rule then applies as on the public API (another
tenant's generation is NOT_FOUND). The relay answers only for what this frontend holds: it never
forwards again. Errors are the public table's (frontend/api_errors.py), so the forwarding frontend
passes them on unchanged.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc

from frontend.auth import Tenant
from frontend.calls import GenerationCalls
from frontend.fleet.relay_client import KEY_HEADER, SERVICE, TENANT_HEADER
from frontend.refusals import InvalidRequest, NotAuthenticated
from frontend.rpc.handlers import HandlerInterceptor, Streaming, Unary, responses, rewrap
from frontend.rpc.interceptors import ErrorInterceptor
from llm.v1 import generations_pb2 as pb


def _header(context: grpc.aio.ServicerContext, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    return ""


class RelayAuth(HandlerInterceptor):
    """Refuses (UNAUTHENTICATED, inside the handler, where the error table applies) a call without
    the relay credential."""

    def __init__(self, credential: str) -> None:
        self._credential = credential.encode()

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        given = next((v for k, v in details.invocation_metadata or () if k == KEY_HEADER), "")
        given_bytes = given if isinstance(given, bytes) else str(given).encode()
        refusal = None if hmac.compare_digest(given_bytes, self._credential) else NotAuthenticated("relay")

        def unary(inner: Unary) -> Unary:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if refusal is not None:
                    raise refusal
                return await inner(request, context)

            return call

        def streaming(inner: Streaming) -> Streaming:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if refusal is not None:
                    raise refusal
                async for item in responses(inner(request, context)):
                    yield item

            return call

        return rewrap(handler, unary, streaming)


class RelayService:
    def __init__(self, calls: GenerationCalls) -> None:
        self.calls = calls

    async def resume(
        self, request: pb.ResumeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GenerationEvent]:
        reader = await self.calls.resume_here(_tenant(context), request)
        context.add_done_callback(lambda _: reader.close())  # the forwarder's stream ended
        async for event in reader.events():
            yield event

    async def cancel(
        self, request: pb.CancelGenerationRequest, context: grpc.aio.ServicerContext
    ) -> pb.Generation:
        return await self.calls.cancel_here(_tenant(context), request)

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Resume": grpc.unary_stream_rpc_method_handler(
                    self.resume,
                    request_deserializer=pb.ResumeRequest.FromString,
                    response_serializer=pb.GenerationEvent.SerializeToString,
                ),
                "Cancel": grpc.unary_unary_rpc_method_handler(
                    self.cancel,
                    request_deserializer=pb.CancelGenerationRequest.FromString,
                    response_serializer=pb.Generation.SerializeToString,
                ),
            },
        )


def _tenant(context: grpc.aio.ServicerContext) -> Tenant:
    tenant_id = _header(context, TENANT_HEADER)
    if not tenant_id:
        raise InvalidRequest("MISSING_TENANT", "a relayed call names its tenant")
    return Tenant(tenant_id, 1.0)  # the weight is not used by Resume or Cancel


@asynccontextmanager
async def relay_server(listen: str, calls: GenerationCalls, credential: str) -> AsyncIterator[int]:
    """Serves the relay on `listen` (port 0 picks one) and yields the bound port."""
    server = grpc.aio.server(interceptors=[ErrorInterceptor(), RelayAuth(credential)])
    server.add_generic_rpc_handlers((RelayService(calls).handler(),))
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()
    try:
        yield port
    finally:
        await server.stop(grace=5)
