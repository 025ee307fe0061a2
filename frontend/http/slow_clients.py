"""Deadlines for what a client sends: uvicorn closes an idle keep-alive connection, but waits for ever
on one that was opened and sent nothing, or sent part of a request's headers (a slowloris holds a
socket and a protocol object each). Here a connection whose request line and headers have not all
arrived within `header_timeout_s` of its opening, or of the first byte of its next request, is
closed. A request's body has its own deadline where the body is read (frontend/http/app.py)."""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers (`deadline_protocol` sets it)."""

    header_timeout_s = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _watch_headers(self) -> None:
        """Armed while the client owes a request's headers (h11's IDLE: none, or part of them);
        disarmed once they are in. An idle keep-alive connection is uvicorn's (its keep-alive
        timeout): this one is armed again by the first byte of the next request."""
        if self.conn.their_state is not h11.IDLE:
            self._disarm()
        elif self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("HTTP connection closed: no complete request headers in %gs", self.header_timeout_s)
            self.transport.close()


def deadline_protocol(header_timeout_s: float) -> type[HeaderDeadline]:
    """The protocol class uvicorn is given (it constructs one per connection)."""
    return type("HeaderDeadlineProtocol", (HeaderDeadline,), {"header_timeout_s": header_timeout_s})
