"""Deadlines for slow clients, over a real uvicorn on loopback (frontend/http/slow_clients.py and the
body deadline of frontend/http/json_body.py): a connection that sends nothing, or part of its
headers, is closed once its header deadline passes; a body that does not arrive whole is answered
408 REQUEST_TIMEOUT; a prompt client, on a kept-alive connection too, is served as before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from frontend.http import json_body
from frontend.http.server import bind
from frontend.http.slow_clients import deadline_protocol

DEADLINE_S = 0.5  # short, so the test is quick; nothing here races it but the slow client itself
BOUND_S = 60.0  # only a connection left open for ever reaches this


async def echo(request: Request) -> Response:
    try:
        doc = await json_body.read(request, 1 << 20, DEADLINE_S)
    except json_body.TooSlow:
        return JSONResponse({"reason": "REQUEST_TIMEOUT"}, 408)
    return JSONResponse({"got": doc})


@asynccontextmanager
async def server() -> AsyncIterator[int]:
    app = Starlette(routes=[Route("/echo", echo, methods=["POST"])])
    config = uvicorn.Config(app, http=deadline_protocol(DEADLINE_S), lifespan="off", log_config=None)
    config.load()
    srv = uvicorn.Server(config)
    srv.lifespan = config.lifespan_class(config)  # as frontend/http/server.py starts it
    sock = bind("127.0.0.1:0")
    await srv.startup(sockets=[sock])
    try:
        yield int(sock.getsockname()[1])
    finally:
        srv.should_exit = True
        await srv.shutdown(sockets=[sock])


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sent until it closed the connection."""
    return await asyncio.wait_for(reader.read(), BOUND_S)


def post(body: bytes, length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    head = (
        f"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n"
    )
    return head.encode() + body


async def test_a_connection_that_sends_nothing_or_part_of_its_headers_is_closed() -> None:
    async with server() as port:
        silent = await asyncio.open_connection("127.0.0.1", port)
        partial = await asyncio.open_connection("127.0.0.1", port)
        partial[1].write(b"POST /echo HTTP/1.1\r\nhost: x\r\n")  # and never the rest
        assert await closed_by_server(silent[0]) == b""
        assert await closed_by_server(partial[0]) == b""
        for _, writer in (silent, partial):
            writer.close()


async def test_a_body_that_does_not_arrive_whole_is_408() -> None:
    async with server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(post(b'{"a":', length=100))  # 95 bytes promised, never sent
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
        assert answer.startswith(b"HTTP/1.1 408 ")
        writer.close()


async def test_a_prompt_client_is_served_on_one_kept_alive_connection() -> None:
    async with server() as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for n in range(3):
            writer.write(post(json.dumps({"n": n}).encode()))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND_S)
            assert head.startswith(b"HTTP/1.1 200 ")
            length = int(
                next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1]
            )
            assert json.loads(await reader.readexactly(length)) == {"got": {"n": n}}
        writer.close()
