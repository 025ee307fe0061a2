"""The retained event stream of one generation: append-only, bounded, readable from any cursor.

One producer (the generation's run) appends numbered events; any number of readers follow it from
a cursor (`after_sequence`): first the retained events after the cursor, then live ones, with no
gap and no duplicate. The log keeps at most `max_events` events and `max_bytes` of them.

Every reader following the log registers a `Cursor`: the last sequence it has consumed (for a
server stream, the last event handed to grpc; for Converse, the client's last ack). The log never
drops an event an attached reader has not consumed. Instead the producer awaits `wait_for_room()`
before each event and is paused while the unconsumed part is at the limits; when no room appears in
time the gateway cancels the generation (reason SLOW_CONSUMER). With no reader attached (a client
inside its disconnect grace) the oldest events are dropped, and a reader that comes back with a
cursor before the first retained event gets CursorExpired (OUT_OF_RANGE / CURSOR_EXPIRED).

    retained:   first ......... consumed | ............ last
                droppable (every reader  | unconsumed: at most max_events / max_bytes,
                has consumed it)         | or the producer waits

Server memory per generation is bounded by the limits plus a few events: the one appended while the
unconsumed part was just under the byte limit, and those appended without waiting for room (one held
when its wait timed out, then the closing usage and finished).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from llm.v1 import generations_pb2 as pb


class CursorExpired(Exception):
    """The events after the reader's cursor are no longer retained."""


@dataclass(slots=True, eq=False)
class Cursor:
    """A reader's registered position: the log retains every event after `consumed` for it."""

    consumed: int  # highest sequence the reader no longer needs


class EventLog:
    def __init__(self, generation_id: str, max_events: int = 4096, max_bytes: int = 4 << 20) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("an event log needs room for at least one event")
        self.generation_id = generation_id
        self.max_events = max_events
        self.max_bytes = max_bytes
        # (event, serialized size, bytes appended up to and including it)
        self._events: deque[tuple[pb.GenerationEvent, int, int]] = deque()
        self._bytes = 0  # retained
        self._appended_bytes = 0  # ever appended
        self._first = 1  # sequence of the oldest retained event
        self._next = 1  # sequence the next appended event must carry
        self._epoch = 0  # highest epoch appended; older ones are stale
        self._closed = False
        self._changed = asyncio.Event()  # set (and replaced) on append and close
        self._room = asyncio.Event()  # set (and replaced) when a reader consumes or leaves
        self._cursors: set[Cursor] = set()
        self.paused = False  # the producer is waiting for room

    @property
    def last_sequence(self) -> int:
        return self._next - 1

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def readers(self) -> int:
        """Readers currently following the log."""
        return len(self._cursors)

    @property
    def retained(self) -> int:
        """Events held now."""
        return len(self._events)

    @property
    def retained_bytes(self) -> int:
        """Serialized bytes of the events held now."""
        return self._bytes

    # --- readers' cursors -------------------------------------------------------------------

    def attach(self, after_sequence: int) -> Cursor:
        """Registers a reader that has consumed everything up to `after_sequence`."""
        if after_sequence + 1 < self._first:
            raise CursorExpired(f"events after {after_sequence} are no longer retained")
        cursor = Cursor(after_sequence)
        self._cursors.add(cursor)
        return cursor

    def advance(self, cursor: Cursor, sequence: int) -> None:
        """The reader has consumed every event up to `sequence` (at most the last appended)."""
        sequence = min(sequence, self.last_sequence)
        if sequence > cursor.consumed:
            cursor.consumed = sequence
            self._wake_producer()

    def detach(self, cursor: Cursor) -> None:
        """The reader is gone; what only it still needed may be dropped. Repeating it is harmless."""
        if cursor in self._cursors:
            self._cursors.discard(cursor)
            self._wake_producer()

    def _unconsumed(self) -> tuple[int, int]:
        """(events, bytes) after the slowest attached reader's cursor."""
        if not self._cursors:
            return 0, 0
        slowest = min(c.consumed for c in self._cursors)
        if slowest >= self.last_sequence:
            return 0, 0
        if slowest < self._first:
            return len(self._events), self._bytes
        _, _, consumed_end = self._events[slowest - self._first]
        return self.last_sequence - slowest, self._appended_bytes - consumed_end

    def has_room(self) -> bool:
        """The next event can be appended without holding more than the limits for a reader."""
        events, size = self._unconsumed()
        return events < self.max_events and size < self.max_bytes

    async def wait_for_room(self, timeout_s: float) -> bool:
        """True once has_room(); False when no reader made room within `timeout_s` (too slow)."""
        if self.has_room():
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self.paused = True
        try:
            while not self.has_room():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                try:
                    await asyncio.wait_for(self._room.wait(), remaining)
                except TimeoutError:
                    return self.has_room()
            return True
        finally:
            self.paused = False

    # --- the producer -----------------------------------------------------------------------

    def append(self, event: pb.GenerationEvent) -> bool:
        """Adds the next event (its sequence must follow the last) and drops the oldest over the
        limits, but never one an attached reader has not consumed: the producer waits for room.

        An event of an older epoch than one already appended is dropped (False): a replaced
        attempt's late output never reaches a client."""
        if self._closed:
            raise RuntimeError(f"log of {self.generation_id} is closed")
        if event.epoch < self._epoch:
            return False
        self._epoch = event.epoch
        if event.sequence != self._next:
            raise ValueError(f"event sequence {event.sequence}, expected {self._next}")
        size = event.ByteSize()
        self._appended_bytes += size
        self._events.append((event, size, self._appended_bytes))
        self._bytes += size
        self._next += 1
        droppable_to = min((c.consumed for c in self._cursors), default=self.last_sequence)
        while (
            len(self._events) > 1
            and self._first <= droppable_to
            and (len(self._events) > self.max_events or self._bytes > self.max_bytes)
        ):
            _, dropped, _ = self._events.popleft()
            self._bytes -= dropped
            self._first += 1
        self._wake_readers()
        return True

    def close(self) -> None:
        """No more events (the generation is terminal); readers end after the last one."""
        self._closed = True
        self._wake_readers()

    def _wake_readers(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _wake_producer(self) -> None:
        self._room.set()
        self._room = asyncio.Event()

    async def follow(
        self, after_sequence: int = 0, cursor: Cursor | None = None
    ) -> AsyncGenerator[pb.GenerationEvent, None]:
        """Events with sequence > after_sequence: retained ones, then live ones until close().

        Without `cursor` the reader registers its own, consumed as each event is handed out and
        released when the iteration ends. With one (from attach()), the caller advances and
        releases it: a Converse stream consumes on the client's ack, not on sending."""
        own = cursor is None
        position = self.attach(after_sequence) if cursor is None else cursor
        following = after_sequence + 1
        try:
            while True:
                while following < self._next:
                    if following < self._first:
                        raise CursorExpired(f"events after {following - 1} are no longer retained")
                    event, _, _ = self._events[following - self._first]
                    following += 1
                    if own:
                        self.advance(position, event.sequence)
                    yield event
                if self._closed:
                    return
                await self._changed.wait()
        finally:
            if own:
                self.detach(position)
