"""Converse: one bidirectional stream multiplexing several generations of one tenant (docs/design.md §3).

    request frames --> reader task --> start:  admitted as Generate admits; a pump per generation
                                       cancel: CancelGeneration's semantics (intent persisted first)
                                       ack:    moves that generation's cursor in its EventLog
    pump (per generation): EventLog.follow --> window --> outgoing queue --> response stream

Flow control: per generation at most `window` events go out beyond the client's last ack; the pump
then waits (other generations go on). The ack is the generation's EventLog cursor, so a client that
stops acking holds the log full, pauses the run, and gets the generation cancelled as SLOW_CONSUMER
(generations.py). Once the client half-closes it can send no more acks: from then on an event counts
as consumed when grpc takes it, as on Generate, and HTTP/2 flow control paces the stream.

Errors: a frame the server cannot act on does not end the stream. A start refused as Generate would
refuse it (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ... or a worker refusing it before its first event),
a cancel of an unknown or another tenant's generation (NOT_FOUND; a cancel of a generation another
frontend runs is forwarded to it, as CancelGeneration's is), or an empty frame
(INVALID_ARGUMENT) is answered with a `rejected` event carrying that status; the stream and its
other generations go on. An ack for a generation not on the stream is ignored (it may just have
finished). The stream ends after the client half-closes and every generation on it has finished; a
client that goes away leaves each of its generations to the disconnect grace period, as Generate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from frontend.api_errors import api_error
from frontend.auth import Tenant
from frontend.generations.manager import GenerationManager, LiveGeneration
from frontend.generations.stream_log import Cursor, CursorExpired
from frontend.refusals import EventsExpired, InternalFailure, InvalidRequest
from frontend.rpc.handlers import MALFORMED
from llm.v1 import generations_pb2 as pb

log = logging.getLogger(__name__)
Starter = Callable[[Tenant, pb.GenerateRequest], Awaitable[LiveGeneration]]
Canceller = Callable[[Tenant, pb.CancelGenerationRequest], Awaitable[pb.Generation]]


@dataclass(slots=True, eq=False)
class _Stream:
    """One generation carried by the conversation."""

    live: LiveGeneration
    request_id: str  # as the client's start frame named it
    cursor: Cursor  # its EventLog reader: consumed = the client's last ack (or send, once half-closed)
    queued: int = 0  # last sequence handed to the outgoing queue
    moved: asyncio.Event = field(default_factory=asyncio.Event)  # set when the window may have opened
    pump: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self.moved.set()
        self.moved = asyncio.Event()


class Conversation:
    def __init__(
        self, tenant: Tenant, start: Starter, cancel: Canceller, manager: GenerationManager, window: int
    ) -> None:
        """cancel: CancelGeneration's call (it reaches the frontend running the generation)."""
        self.tenant = tenant
        self.start = start
        self.cancel = cancel
        self.manager = manager
        self.window = window
        self._streams: dict[str, _Stream] = {}
        # bounded: a client that reads nothing stops the pumps and the reader, not memory
        self._out: asyncio.Queue[pb.GenerationEvent | Exception | None] = asyncio.Queue(window)
        self._reader: asyncio.Task[None] | None = None
        self._half_closed = False
        self._ending = False  # the end of the response stream is queued
        self._closed = False

    async def events(self, frames: AsyncIterator[pb.ConverseRequest]) -> AsyncIterator[pb.GenerationEvent]:
        """The response stream; raises ApiError when the conversation itself fails."""
        self._reader = asyncio.create_task(self._read(frames), name="converse-reader")
        try:
            while (item := await self._out.get()) is not None:
                if isinstance(item, Exception):
                    raise item
                s = self._streams.get(item.generation_id)
                if s is not None and self._half_closed:
                    self._consume(s, item.sequence)
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """The RPC ended (completed, cancelled, disconnected): release every generation, whose runs
        go on into their disconnect grace period. Repeating it is harmless."""
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        for s in list(self._streams.values()):
            if s.pump is not None:
                s.pump.cancel()
            self._leave(s)

    # --- request frames ---------------------------------------------------------------------

    async def _read(self, frames: AsyncIterator[pb.ConverseRequest]) -> None:
        try:
            async for frame in frames:
                if frame is MALFORMED:
                    await self._reject(InvalidRequest("MALFORMED_FRAME", "a frame could not be parsed"))
                    continue
                kind = frame.WhichOneof("frame")
                if kind == "start":
                    await self._start(frame.start)
                elif kind == "cancel":
                    await self._cancel(frame.cancel)
                elif kind == "ack":
                    self._ack(frame.ack)
                else:
                    await self._reject(InvalidRequest("EMPTY_FRAME", "a frame needs start, cancel or ack"))
        except Exception:
            log.exception("converse: handling a frame failed")
            await self._out.put(_internal())
            return
        self._half_closed = True
        for s in self._streams.values():
            self._consume(s, s.queued)  # no acks can come: what was sent counts as consumed
        await self._end_if_done()

    async def _start(self, request: pb.GenerateRequest) -> None:
        try:
            live = await self.start(self.tenant, request)
        except Exception as e:  # refused (the error table's status); the stream goes on
            await self._reject(api_error(e), request_id=request.request_id)
            return
        if live.generation_id in self._streams:
            return  # a retry of a generation already carried here
        try:
            cursor = live.log.attach(0)  # a retry of an earlier generation whose start was dropped
        except CursorExpired:
            await self._reject(EventsExpired(live.generation_id), live.generation_id, request.request_id)
            return
        s = _Stream(live, request.request_id, cursor)
        self._streams[live.generation_id] = s
        self.manager.client_joined(live)
        s.pump = asyncio.create_task(self._pump(s), name=f"converse-{live.generation_id}")

    async def _cancel(self, generation_id: str) -> None:
        try:
            await self.cancel(self.tenant, pb.CancelGenerationRequest(generation_id=generation_id))
        except Exception as e:
            await self._reject(api_error(e), generation_id)

    def _ack(self, ack: pb.Ack) -> None:
        s = self._streams.get(ack.generation_id)
        if s is not None:
            self._consume(s, min(ack.sequence, s.queued))  # never beyond what was sent

    def _consume(self, s: _Stream, sequence: int) -> None:
        s.live.log.advance(s.cursor, sequence)
        s.wake()

    async def _reject(self, refused: BaseException, generation_id: str = "", request_id: str = "") -> None:
        error = api_error(refused)
        log.info("converse: frame refused: %s %s", error.code.name, error.reason)
        # echoes at most 128 characters of the client's id: a refused frame never costs more than it
        rejected = pb.Rejected(request_id=request_id[:128], status=error.to_proto())
        await self._out.put(pb.GenerationEvent(generation_id=generation_id, rejected=rejected))

    # --- one generation's events --------------------------------------------------------------

    async def _pump(self, s: _Stream) -> None:
        """Moves the generation's events to the outgoing queue, at most `window` beyond the ack."""
        log_ = s.live.log
        try:
            async for event in log_.follow(0, s.cursor):
                while event.sequence > s.cursor.consumed + self.window:
                    await s.moved.wait()
                await self._out.put(event)
                s.queued = event.sequence
            if s.live.error is not None and not s.live.finished:  # refused, or its end not recorded
                await self._reject(s.live.error, s.live.generation_id, s.request_id)
            s.live.delivered = True
        except Exception:
            log.exception("converse: streaming generation %s failed", s.live.generation_id)
            await self._out.put(_internal())
        finally:
            self._leave(s)
        await self._end_if_done()

    def _leave(self, s: _Stream) -> None:
        if self._streams.get(s.live.generation_id) is s:
            del self._streams[s.live.generation_id]
            s.live.log.detach(s.cursor)
            self.manager.client_left(s.live)

    async def _end_if_done(self) -> None:
        if self._half_closed and not self._streams and not self._ending and not self._closed:
            self._ending = True
            await self._out.put(None)


def _internal() -> InternalFailure:
    return InternalFailure("INTERNAL", "the conversation failed")
