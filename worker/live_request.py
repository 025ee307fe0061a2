"""A request in the CPU worker's engine, with what the adapter (adapter.py) needs to answer it."""

from __future__ import annotations

from collections.abc import Sequence

from worker.outbox import Stream
from worker.protocol import Request
from worker.request_spans import RequestSpan

COALESCE_TOKENS = 16  # batch-tier tokens per response while the batch is large (adapter.py's docstring)


class LiveRequest(Stream):
    __slots__ = ("batch_tier", "check_turn", "held", "span", "streaming")

    def __init__(
        self, rid: str, request: Request, streaming: bool, batch_tier: bool, check_turn: int
    ) -> None:
        super().__init__(rid, request)
        self.streaming = streaming
        self.batch_tier = batch_tier  # its stream may be coalesced
        self.check_turn = check_turn  # while coalesced, asked where steps % CHECK_EVERY (adapter.py) is this
        # non-streaming: every token, sent once at the end; streaming: tokens held for coalescing
        self.held: list[int] = []
        self.span: RequestSpan | None = None  # its engine span (request_spans.py), until it ends

    def to_send(
        self, new_ids: Sequence[int], produced: int, done: bool, coalescing: bool
    ) -> Sequence[int] | None:
        """A streaming request's tokens to send after a step (`produced` in all so far), or None
        while they are held for coalescing; its first tokens and its last are never held."""
        ids = (*self.held, *new_ids) if self.held else new_ids  # no copy per step unless held
        first = produced == len(ids)  # nothing sent before
        if not (done or first) and self.batch_tier and coalescing and len(ids) < COALESCE_TOKENS:
            self.held = list(ids)  # sent with a later step's tokens
            return None
        self.held = []
        return ids


def end_span(live: LiveRequest, reason: str, error: bool = True) -> None:
    """The request is out of the engine: its engine span, if it has one, ends."""
    if live.span is not None:
        live.span.end(reason, error)
        live.span = None
