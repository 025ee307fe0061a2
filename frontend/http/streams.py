"""Following a generation over HTTP: ASGI responses that read a Follower (frontend/generations/reader.py).

EventStream  `text/event-stream`, one frame per event as its renderer writes it (the REST API's
             GenerationEvents, or OpenAI chunks). The status line waits for the first event (at
             most HEADERS_WAIT_S): a generation refused before it produced any (a queue deadline,
             a worker that would not admit it) is answered with its error status, as a gRPC
             stream ends with its status; an error after the headers is a last frame.
Document     the whole stream collected into one JSON document (stream = false).

Both watch the connection while they run: a client that goes away ends the response at once and
closes its Follower, which starts the generation's disconnect grace period exactly as a gRPC stream
that ends does (frontend/generations/live.py). Writes are awaited (uvicorn waits while the socket's buffer is
full), so a client that stops reading holds its cursor back and pauses the run, as on gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from frontend.api_errors import ApiError, api_error
from frontend.generations.reader import Follower
from frontend.http.errors import dumps
from llm.v1 import generations_pb2 as pb

log = logging.getLogger(__name__)
HEADERS_WAIT_S = 10.0  # the longest the status line waits for a generation's first event
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # proxies: deliver each event as it comes
]
Refusal = Callable[[ApiError], Response]  # the error answer of the API the response belongs to


class Renderer(Protocol):
    def event(self, event: pb.GenerationEvent) -> bytes:
        """The frame(s) of one event; b"" for none."""
        ...

    def error(self, error: ApiError) -> bytes:
        """The last frame of a stream that ended with an error after its headers went out."""
        ...

    def end(self) -> bytes:
        """What follows the last event (OpenAI's `data: [DONE]`)."""
        ...


async def _disconnect(receive: Receive) -> None:
    """Returns when the client has gone (the request body was read before the response ran)."""
    while (await receive())["type"] != "http.disconnect":
        pass


class _Following:
    """Runs `deliver` until it ends or the client goes away; the Follower is closed either way."""

    def __init__(self, reader: Follower, refusal: Refusal, headers: dict[str, str]) -> None:
        self.reader = reader
        self.refusal = refusal
        self.headers = [(k.encode(), v.encode()) for k, v in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.ensure_future(_disconnect(receive))
        delivery = asyncio.ensure_future(self.deliver(scope, receive, send))
        try:
            await asyncio.wait({gone, delivery}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not delivery.done():
                delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await delivery
            self.reader.close()
        if not delivery.cancelled() and delivery.exception() is not None:
            raise delivery.exception()  # type: ignore[misc]

    async def deliver(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError

    async def refuse(self, error: ApiError, scope: Scope, receive: Receive, send: Send) -> None:
        response = self.refusal(error)
        response.raw_headers.extend(self.headers)
        await response(scope, receive, send)


class EventStream(_Following):
    def __init__(
        self, reader: Follower, renderer: Renderer, refusal: Refusal, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(reader, refusal, headers or {})
        self.renderer = renderer

    async def deliver(self, scope: Scope, receive: Receive, send: Send) -> None:
        events = self.reader.events()
        first = asyncio.ensure_future(anext(events, None))
        try:
            await asyncio.wait({first}, timeout=HEADERS_WAIT_S)
            if first.done() and first.exception() is not None:
                await self.refuse(api_error(first.exception()), scope, receive, send)  # type: ignore[arg-type]
                return
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + self.headers})
            await self._frames(first, events, send)
        finally:
            if not first.done():
                first.cancel()
            with contextlib.suppress(BaseException):
                await first
            await events.aclose()

    async def _frames(
        self,
        first: asyncio.Future[pb.GenerationEvent | None],
        events: AsyncIterator[pb.GenerationEvent],
        send: Send,
    ) -> None:
        render = self.renderer
        try:
            event = await first
            while event is not None:
                frame = render.event(event)
                if frame:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                event = await anext(events, None)
            tail = render.end()
        except Exception as e:
            tail = render.error(api_error(e))
        await send({"type": "http.response.body", "body": tail, "more_body": False})


class Document(_Following):
    """The generation's events collected, then `build(events)` as one JSON document (200), or the
    refusal of an error at any point (no partial document)."""

    def __init__(
        self,
        reader: Follower,
        build: Callable[[list[pb.GenerationEvent]], dict[str, Any]],
        refusal: Refusal,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(reader, refusal, headers or {})
        self.build = build

    async def deliver(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            collected = [event async for event in self.reader.events()]
        except Exception as e:
            await self.refuse(api_error(e), scope, receive, send)
            return
        body = dumps(self.build(collected))
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers + self.headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
