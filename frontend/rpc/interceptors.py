"""The gRPC server's interceptors, outermost first: errors, then authentication.

ErrorInterceptor  every handler runs with `api_error` (frontend/api_errors.py) applied to whatever it
                  raises, so servicers raise and never abort; authentication's refusals pass
                  through it too. A request whose bytes did not parse is INVALID_ARGUMENT.
AuthInterceptor   resolves the caller from its API key (frontend/auth.py) before the handler runs:
                  a tenant for the tenant services, an admin for Admin (the fleet's worker key for
                  FetchArtifactFile alone); health and reflection need no key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from contracts.scopes import GENERATE, USAGE
from frontend import auth
from frontend.api_errors import api_error
from frontend.auth import ApiKeyStore, Tenant
from frontend.refusals import InvalidRequest, Refusal
from frontend.rpc.handlers import MALFORMED, HandlerInterceptor, Streaming, Unary, responses, rewrap, tolerant

UNAUTHENTICATED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
# the scope a tenant key needs, by service (Models: any key of the tenant)
SCOPE_OF_SERVICE = {"/llm.v1.Generations/": GENERATE, "/llm.v1.Usage/": USAGE, "/llm.v1.Account/": USAGE}
ADMIN_PREFIX = "/llm.v1.Admin/"
FETCH_METHOD = "/llm.v1.Admin/FetchArtifactFile"  # also open to the fleet's worker key (fetch_keys)


class ErrorInterceptor(HandlerInterceptor):
    """Runs every handler with `api_error` applied to whatever it raises (outermost interceptor, so
    authentication errors pass through it too)."""

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return mapped(handler)


def mapped(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """The same handler, aborting with the mapped status when it raises."""

    def unary(inner: Unary) -> Unary:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                refuse_malformed(request)
                return await inner(request, context)
            except grpc.aio.AbortError:
                raise
            except Exception as e:
                await context.abort_with_status(api_error(e).to_status())

        return call

    def streaming(inner: Streaming) -> Streaming:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            try:
                refuse_malformed(request)
                async for item in responses(inner(request, context)):
                    yield item
            except grpc.aio.AbortError:
                raise
            except Exception as e:
                await context.abort_with_status(api_error(e).to_status())

        return call

    return rewrap(handler, unary, streaming, tolerant)


def refuse_malformed(request: Any) -> None:
    """INVALID_ARGUMENT for a request whose bytes did not parse (client-streamed messages are
    checked by their handler, e.g. Converse frames)."""
    if request is MALFORMED:
        raise InvalidRequest("MALFORMED_REQUEST", "the request message could not be parsed")


class AuthInterceptor(HandlerInterceptor):
    def __init__(self, keys: ApiKeyStore) -> None:
        self._keys = keys

    def wrap(self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        if details.method.startswith(UNAUTHENTICATED_PREFIXES):
            return handler
        tenant: Tenant | Refusal | str
        try:
            if details.method == FETCH_METHOD:
                tenant = self._keys.authenticate_fetch(details.invocation_metadata)
            elif details.method.startswith(ADMIN_PREFIX):
                tenant = self._keys.authenticate_admin(details.invocation_metadata)
            else:
                service = details.method[: details.method.rfind("/") + 1]
                tenant = self._keys.authenticate(details.invocation_metadata, SCOPE_OF_SERVICE.get(service))
        except Refusal as e:
            tenant = e
        return _wrap(handler, tenant)


def _wrap(handler: grpc.RpcMethodHandler, tenant: Tenant | Refusal | str) -> grpc.RpcMethodHandler:
    """The same handler, run with the tenant set (a str: an admin call, by that admin), or refused:
    the refusal is raised inside the handler, where frontend/api_errors.py turns it into the status."""

    def enter() -> None:
        if isinstance(tenant, Refusal):
            raise tenant
        auth.enter(tenant)

    def unary(inner: Unary) -> Unary:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
            enter()
            return await inner(request, context)

        return call

    def streaming(inner: Streaming) -> Streaming:
        async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            enter()
            async for item in responses(inner(request, context)):
                yield item

        return call

    return rewrap(handler, unary, streaming)
