"""API-key authentication: `authorization: Bearer <key>` metadata -> tenant.

Keys are kept only as sha256 digests. The interceptor resolves the tenant before any handler runs
and hands it to the handler through a context variable; health and reflection need no key.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from frontend.config import TenantSettings
from frontend.errors import ApiError, unauthenticated

UNAUTHENTICATED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_current_tenant: contextvars.ContextVar[Tenant] = contextvars.ContextVar("tenant")


@dataclass(slots=True, frozen=True)
class Tenant:
    id: str
    weight: float
    settings: TenantSettings


def current_tenant() -> Tenant:
    """The authenticated tenant of the running call (set by AuthInterceptor)."""
    return _current_tenant.get()


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ApiKeyStore:
    def __init__(self, tenants: Iterable[TenantSettings]) -> None:
        self._by_digest: dict[bytes, Tenant] = {}
        for t in tenants:
            for key in t.api_keys:
                self._by_digest[_digest(key)] = Tenant(t.id, t.weight, t)

    def authenticate(self, metadata: Iterable[tuple[str, Any]] | None) -> Tenant:
        header = next((v for k, v in metadata or () if k == "authorization"), None)
        if header is None:
            raise unauthenticated("missing authorization metadata (expected 'Bearer <api key>')")
        if isinstance(header, bytes):
            header = header.decode(errors="replace")
        scheme, _, key = str(header).partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise unauthenticated("authorization must be 'Bearer <api key>'")
        digest = _digest(key.strip())
        for candidate, tenant in self._by_digest.items():
            if hmac.compare_digest(candidate, digest):
                return tenant
        raise unauthenticated("invalid API key")


class AuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, keys: ApiKeyStore) -> None:
        self._keys = keys

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or details.method.startswith(UNAUTHENTICATED_PREFIXES):
            return handler
        try:
            tenant: Tenant | ApiError = self._keys.authenticate(details.invocation_metadata)
        except ApiError as e:
            tenant = e
        return _wrap(handler, tenant)


def _wrap(handler: grpc.RpcMethodHandler, tenant: Tenant | ApiError) -> grpc.RpcMethodHandler:
    """The same handler, run with the tenant set, or aborting with UNAUTHENTICATED."""

    async def deny(context: grpc.aio.ServicerContext) -> None:
        assert isinstance(tenant, ApiError)
        await context.abort_with_status(tenant.to_status())

    if handler.unary_unary or handler.stream_unary:
        inner = handler.unary_unary or handler.stream_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(tenant, ApiError):
                await deny(context)
            _current_tenant.set(tenant)  # type: ignore[arg-type]
            return await inner(request, context)

        factory = (
            grpc.unary_unary_rpc_method_handler
            if handler.unary_unary
            else grpc.stream_unary_rpc_method_handler
        )
        return factory(unary, handler.request_deserializer, handler.response_serializer)

    inner_stream = handler.unary_stream or handler.stream_stream

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(tenant, ApiError):
            await deny(context)
        _current_tenant.set(tenant)  # type: ignore[arg-type]
        async for item in inner_stream(request, context):
            yield item

    factory = (
        grpc.unary_stream_rpc_method_handler
        if handler.unary_stream
        else grpc.stream_stream_rpc_method_handler
    )
    return factory(streaming, handler.request_deserializer, handler.response_serializer)
