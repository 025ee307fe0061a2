"""The retained event stream of one generation: append-only, bounded, readable from any cursor.

One producer (the generation's run) appends numbered events; any number of readers follow it from
a cursor (`after_sequence`): first the retained events after the cursor, then live ones, with no
gap and no duplicate. The log keeps at most `max_events` events and `max_bytes` of them; when it
must drop its oldest, a reader whose cursor falls before the first retained event gets
CursorExpired (OUT_OF_RANGE / CURSOR_EXPIRED to the client). Server memory per generation is
bounded by the limits, whatever the readers do.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from llm.v1 import generations_pb2 as pb


class CursorExpired(Exception):
    """The events after the reader's cursor are no longer retained."""


class EventLog:
    def __init__(self, generation_id: str, max_events: int = 4096, max_bytes: int = 4 << 20) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("an event log needs room for at least one event")
        self.generation_id = generation_id
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: deque[tuple[pb.GenerationEvent, int]] = deque()  # (event, serialized size)
        self._bytes = 0
        self._first = 1  # sequence of the oldest retained event
        self._next = 1  # sequence the next appended event must carry
        self._closed = False
        self._changed = asyncio.Event()
        self.readers = 0  # readers currently following the log

    @property
    def last_sequence(self) -> int:
        return self._next - 1

    @property
    def closed(self) -> bool:
        return self._closed

    def append(self, event: pb.GenerationEvent) -> None:
        """Adds the next event (its sequence must follow the last), dropping the oldest over limits."""
        if self._closed:
            raise RuntimeError(f"log of {self.generation_id} is closed")
        if event.sequence != self._next:
            raise ValueError(f"event sequence {event.sequence}, expected {self._next}")
        size = event.ByteSize()
        self._events.append((event, size))
        self._bytes += size
        self._next += 1
        while len(self._events) > 1 and (len(self._events) > self.max_events or self._bytes > self.max_bytes):
            _, dropped = self._events.popleft()
            self._bytes -= dropped
            self._first += 1
        self._wake()

    def close(self) -> None:
        """No more events (the generation is terminal); readers end after the last one."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, after_sequence: int = 0) -> AsyncIterator[pb.GenerationEvent]:
        """Events with sequence > after_sequence: retained ones, then live ones until close()."""
        cursor = after_sequence + 1
        self.readers += 1
        try:
            while True:
                if cursor < self._first:
                    raise CursorExpired(f"events after {cursor - 1} are no longer retained")
                while cursor < self._next:
                    if cursor < self._first:
                        raise CursorExpired(f"events after {cursor - 1} are no longer retained")
                    event, _ = self._events[cursor - self._first]
                    cursor += 1
                    yield event
                if self._closed:
                    return
                await self._changed.wait()
        finally:
            self.readers -= 1
