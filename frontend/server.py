"""The frontend gRPC server: services, auth interceptor, health (frontend/health.py) and reflection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from frontend.admin import AdminService
from frontend.auth import ApiKeyStore, AuthInterceptor
from frontend.error_map import ErrorInterceptor
from frontend.generations import GenerationManager
from frontend.health import HealthCheck
from frontend.registry import ModelRegistry
from frontend.service import GenerationsService, ModelsService, UsageService
from lifecycle.reads import usage_by_tenant
from llm.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    generations_pb2,
    generations_pb2_grpc,
    models_pb2,
    models_pb2_grpc,
    usage_pb2,
    usage_pb2_grpc,
)

SERVICE_NAMES = (
    generations_pb2.DESCRIPTOR.services_by_name["Generations"].full_name,
    models_pb2.DESCRIPTOR.services_by_name["Models"].full_name,
    usage_pb2.DESCRIPTOR.services_by_name["Usage"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
)


@asynccontextmanager
async def frontend_server(
    listen: str,
    keys: ApiKeyStore,
    registry: ModelRegistry,
    manager: GenerationManager,
    converse_window: int = 256,
    admin: AdminService | None = None,
    health_interval_s: float = 1.0,
) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
    """Starts the server on `listen` (port 0 picks one) and yields (server, bound port). Its
    health is recomputed every `health_interval_s` (frontend/health.py)."""
    server = grpc.aio.server(interceptors=[ErrorInterceptor(), AuthInterceptor(keys)])
    pool = manager.dispatcher.pool
    generations = GenerationsService(registry, manager, converse_window)
    generations_pb2_grpc.add_GenerationsServicer_to_server(generations, server)
    models_pb2_grpc.add_ModelsServicer_to_server(ModelsService(registry, pool), server)
    store = manager.store
    usage = UsageService(lambda tenant, start, end: usage_by_tenant(store, tenant, start=start, end=end))
    usage_pb2_grpc.add_UsageServicer_to_server(usage, server)
    if admin is not None:
        admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot listen on {listen}")
    await server.start()
    check = HealthCheck(health_servicer, registry, pool, SERVICE_NAMES, health_interval_s)
    await check.refresh()
    check.start()
    try:
        yield server, port
    finally:
        await check.close()
        await health_servicer.enter_graceful_shutdown()
        await server.stop(grace=5)
