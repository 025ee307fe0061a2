"""The frontend gRPC server: services, auth interceptor, health (frontend/health.py) and reflection.

The calls it serves (frontend/calls.py: one tokenizer pool, one set of rules) are shared with the
HTTP server (frontend/http/) when the platform runs both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from config.settings import FrontendSettings
from frontend.admin.service import AdminService
from frontend.auth import ApiKeyStore
from frontend.calls import FrontendCalls, frontend_calls
from frontend.catalog.registry import ModelRegistry
from frontend.generations.manager import GenerationManager
from frontend.health import HealthCheck
from frontend.refusals import Exhausted
from frontend.rpc.interceptors import AuthInterceptor, ErrorInterceptor
from frontend.rpc.servicers import AccountService, GenerationsService, ModelsService, UsageService
from llm.v1 import (
    account_pb2,
    account_pb2_grpc,
    admin_pb2,
    admin_pb2_grpc,
    generations_pb2,
    generations_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)

DEFAULT_SETTINGS = FrontendSettings()
SERVICE_NAMES = (
    generations_pb2.DESCRIPTOR.services_by_name["Generations"].full_name,
    models_pb2.DESCRIPTOR.services_by_name["Models"].full_name,
    usage_pb2.DESCRIPTOR.services_by_name["Usage"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
    account_pb2.DESCRIPTOR.services_by_name["Account"].full_name,
)


class CappedHealthServicer(health.aio.HealthServicer):
    """The stock health service; Health.Watch streams (no credential needed) are capped in number."""

    def __init__(self, max_watchers: int) -> None:
        super().__init__()
        self.max_watchers = max_watchers
        self.watchers = 0

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext) -> None:
        if self.watchers >= self.max_watchers:
            raise Exhausted(
                "TOO_MANY_WATCHERS",
                f"at most {self.max_watchers} Health.Watch streams at a time",
                retry_after_s=5.0,
            )
        self.watchers += 1
        try:
            await super().Watch(request, context)
        finally:
            self.watchers -= 1


class CappedReflectionServicer(reflection.aio.ReflectionServicer):
    """The stock server reflection; its streams (no credential needed) are capped in number, as
    Health.Watch streams are."""

    def __init__(self, service_names: tuple[str, ...], max_streams: int) -> None:
        super().__init__(service_names)
        self.max_streams = max_streams
        self.streams = 0

    async def ServerReflectionInfo(
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        if self.streams >= self.max_streams:
            raise Exhausted(
                "TOO_MANY_REFLECTION_STREAMS",
                f"at most {self.max_streams} server reflection streams at a time",
                retry_after_s=5.0,
            )
        self.streams += 1
        try:
            async for response in super().ServerReflectionInfo(request_iterator, context):
                yield response
        finally:
            self.streams -= 1


def bind(server: grpc.aio.Server, listen: str, settings: FrontendSettings) -> int:
    """Binds `listen` with TLS when the settings name a certificate (mutual TLS with a client CA)."""
    if not settings.tls_cert_file:
        return server.add_insecure_port(listen)
    client_ca = Path(settings.tls_client_ca_file).read_bytes() if settings.tls_client_ca_file else None
    credentials = grpc.ssl_server_credentials(
        [(Path(settings.tls_key_file).read_bytes(), Path(settings.tls_cert_file).read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )
    return server.add_secure_port(listen, credentials)


@asynccontextmanager
async def frontend_server(
    listen: str,
    keys: ApiKeyStore,
    registry: ModelRegistry,
    manager: GenerationManager,
    settings: FrontendSettings = DEFAULT_SETTINGS,
    admin: AdminService | None = None,
    health_interval_s: float = 1.0,
    calls: FrontendCalls | None = None,
) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
    """Starts the server on `listen` (port 0 picks one) and yields (server, bound port). Its
    health is recomputed every `health_interval_s` (frontend/health.py). `calls`: the calls it
    shares with the HTTP server (its own when not given)."""
    if calls is None:
        async with frontend_calls(registry, manager, settings) as own:
            args = (listen, keys, registry, manager, settings, admin, health_interval_s, own)
            async with frontend_server(*args) as bound:
                yield bound
        return
    server = grpc.aio.server(
        interceptors=[ErrorInterceptor(), AuthInterceptor(keys)],
        options=[
            ("grpc.max_receive_message_length", settings.max_request_bytes),
            ("grpc.max_send_message_length", 16 << 20),
        ],
    )
    pool = calls.pool
    generations = GenerationsService(calls.generations, calls.converse_window)
    generations_pb2_grpc.add_GenerationsServicer_to_server(generations, server)
    models_pb2_grpc.add_ModelsServicer_to_server(ModelsService(calls.registry, pool), server)
    usage_pb2_grpc.add_UsageServicer_to_server(UsageService(calls.usage, calls.accounts), server)
    account_pb2_grpc.add_AccountServicer_to_server(AccountService(calls.accounts), server)
    if admin is not None:
        admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
    health_servicer = CappedHealthServicer(settings.max_health_watchers)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
    reflected = (*SERVICE_NAMES, health_name, reflection.SERVICE_NAME)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        CappedReflectionServicer(reflected, settings.max_reflection_streams), server
    )
    port = bind(server, listen, settings)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()

    def accepting() -> bool:  # new work needs the control store too: NOT_SERVING while it is away
        return not manager.draining and manager.store_probe.available

    manager.store_probe.on_change = pool.changed.set  # a flip recomputes health at once
    observe = manager.metrics.health_changed
    check = HealthCheck(health_servicer, registry, pool, SERVICE_NAMES, health_interval_s, accepting, observe)
    await check.refresh()
    check.start()
    try:
        yield server, port
    finally:
        await check.close()
        await health_servicer.enter_graceful_shutdown()
        await server.stop(grace=5)
