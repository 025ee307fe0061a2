"""The HTTP listener: uvicorn serving the app (frontend/http/app.py) in the frontend's own event
loop, beside the gRPC server, so both reach the same GenerationManager with no hop between them.

uvicorn is started piecewise (bind, startup, its tick loop as a task, shutdown) rather than with
`serve()`, which would install its own signal handlers over the platform's. TLS: the gRPC
listener's certificate and key ([frontend] tls_*), with client certificates required when it has a
client CA, as on gRPC.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import uvicorn
from starlette.routing import BaseRoute

from config.settings import FrontendSettings, HttpSettings
from frontend.admin.calls import AdminCalls
from frontend.auth import ApiKeyStore
from frontend.calls import FrontendCalls
from frontend.http.app import http_app
from frontend.http.slow_clients import deadline_protocol

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 5  # as the gRPC server's stop(grace=5)


def bind(listen: str) -> socket.socket:
    """A listening socket on host:port (port 0 picks one); OSError when it is taken."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(2048)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


@asynccontextmanager
async def http_server(
    listen: str,
    calls: FrontendCalls,
    keys: ApiKeyStore,
    settings: HttpSettings,
    frontend: FrontendSettings,
    admin: AdminCalls | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> AsyncIterator[int]:
    """Serves the HTTP app on `listen` until exit; yields the bound port. admin: Admin's calls
    (/v1/admin/...); extra_routes: served beside the API (the console)."""
    app = http_app(calls, keys, settings, frontend.max_request_bytes, admin, extra_routes)
    tls: dict[str, object] = {}
    if frontend.tls_cert_file:
        tls = {"ssl_certfile": frontend.tls_cert_file, "ssl_keyfile": frontend.tls_key_file}
        if frontend.tls_client_ca_file:
            tls |= {"ssl_ca_certs": frontend.tls_client_ca_file, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    config = uvicorn.Config(
        app,
        http=deadline_protocol(settings.header_timeout_s),  # h11, with a deadline for headers
        lifespan="off",
        access_log=False,
        log_config=None,  # the process's logging stays as the platform set it
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        **tls,  # type: ignore[arg-type]
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    sock = bind(listen)
    port = int(sock.getsockname()[1])
    await server.startup(sockets=[sock])
    ticks = asyncio.create_task(server.main_loop(), name="http-ticks")  # its Date header
    log.info("HTTP API on %s:%d", listen.rpartition(":")[0], port)
    try:
        yield port
    finally:
        server.should_exit = True
        await ticks
        await server.shutdown(sockets=[sock])
