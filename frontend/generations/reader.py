"""Following a generation: what a client stream (gRPC or HTTP) reads.

Follower  the interface the transports read: the generation's id, its events from a cursor, close()
Reader    a follower of a generation this frontend runs: its retained EventLog (frontend/generations/live.py)
A follower of a generation another frontend runs is a relay stream (frontend/fleet/relay_client.py).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol

from frontend.generations.manager import GenerationManager, LiveGeneration
from frontend.generations.stream_log import CursorExpired
from frontend.refusals import EventsExpired
from llm.v1 import generations_pb2 as pb


class Follower(Protocol):
    @property
    def generation_id(self) -> str: ...

    def events(self) -> AsyncGenerator[pb.GenerationEvent, None]:
        """The events after the cursor, live until the generation ends; raises the ApiError of a
        generation that ended without `finished` (refused, or its end could not be recorded)."""
        ...

    def close(self) -> None:
        """The client stream ended (for any reason). Repeating it is harmless."""


class Reader:
    """One client stream following `live` after sequence `after`. Its cursor advances as the
    transport takes each event (gRPC and HTTP both await a write's completion before asking for the
    next), so a client that stops reading stops the cursor once flow control blocks the write, and
    the run is then paused (and, too slow, cancelled SLOW_CONSUMER).

    The transport calls close() when its stream ends for any reason (completion, cancellation,
    disconnect): a generator that is never resumed after its client went away cannot be relied on
    to do it."""

    def __init__(self, manager: GenerationManager, live: LiveGeneration, after: int) -> None:
        try:
            self.cursor = live.log.attach(after)
        except CursorExpired as e:
            raise EventsExpired(live.generation_id) from e
        self.live = live
        self.after = after
        self._manager = manager
        manager.client_joined(live)
        self._span = live.observer.delivery("delivery", after) if live.observer is not None else None
        self._closed = False

    @property
    def generation_id(self) -> str:
        return self.live.generation_id

    async def events(self) -> AsyncGenerator[pb.GenerationEvent, None]:
        live = self.live
        error: Exception | None = None
        try:
            async for event in live.log.follow(self.after, self.cursor):
                live.log.advance(self.cursor, event.sequence)
                yield event
        except CursorExpired:
            error = EventsExpired(live.generation_id)
        if error is None and live.error is not None and not live.finished:
            error = live.error
        live.delivered = True  # this follower reached its end
        if error is not None:
            raise error

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.live.log.detach(self.cursor)
        self._manager.client_left(self.live)
        if self._span is not None:
            self._span.set_attribute("llm.delivered_through", self.cursor.consumed)
            self._span.end()
