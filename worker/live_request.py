"""A request in the CPU worker's engine, with what the adapter (adapter.py) needs to answer it, and
how its stream is coalesced.

Batch-tier streams are coalesced while the batch is large: when a step answers at least
`coalesce_from` requests (adapter.py), a BATCH-tier request's tokens after its first are held until
it has COALESCE_TOKENS of them (or finishes), then sent as one response. Each response
costs the stub, tritonserver and the frontend per-response work on the cores the engine steps on
(offline 64 x 128/128 on 2 cores: the frontend took 0.14 cores at 4 tokens a response, 0.04 at
16); batch-tier clients ask for throughput, not an even token rhythm. The first token is never
held, so a batch request's time to first token stays what the engine gave it. Interactive streams
always get every step's tokens at once.

While coalescing, a BATCH-tier stream is also asked whether it was cancelled only once every
CHECK_EVERY steps (each stream on its own turn, so every step asks about a share of them); other
streams are asked every step. Each ask is a round trip to tritonserver on the outbox thread, which
shares the cores with the step: at a batch of 64 that was about 900 a second. A cancelled batch
request then runs at most CHECK_EVERY steps longer; its client, who gets a response only every
COALESCE_TOKENS steps, gave up the even rhythm already.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.engine import TokenLogprob
from worker.outbox import Stream
from worker.protocol import Request
from worker.request_spans import RequestSpan

COALESCE_TOKENS = 16  # batch-tier tokens per response while the batch is large
CHECK_EVERY = 4  # steps between a coalesced batch-tier stream's cancellation checks


class LiveRequest(Stream):
    __slots__ = ("batch_tier", "check_turn", "held", "held_logprobs", "span", "streaming")

    def __init__(
        self, rid: str, request: Request, streaming: bool, batch_tier: bool, check_turn: int
    ) -> None:
        super().__init__(rid, request)
        self.streaming = streaming
        self.batch_tier = batch_tier  # its stream may be coalesced
        self.check_turn = check_turn  # while coalesced, asked where steps % CHECK_EVERY is this
        # non-streaming: every token, sent once at the end; streaming: tokens held for coalescing
        self.held: list[int] = []
        self.held_logprobs: list[TokenLogprob] = []  # theirs, when the request asked for them
        self.span: RequestSpan | None = None  # its engine span (request_spans.py), until it ends

    def to_send(
        self,
        new_ids: Sequence[int],
        new_logprobs: Sequence[TokenLogprob],
        produced: int,
        done: bool,
        coalescing: bool,
    ) -> tuple[Sequence[int], Sequence[TokenLogprob]] | None:
        """A streaming request's tokens (and their log-probabilities) to send after a step
        (`produced` in all so far), or None while they are held for coalescing; its first tokens
        and its last are never held."""
        ids = (*self.held, *new_ids) if self.held else new_ids  # no copy per step unless held
        logprobs = (*self.held_logprobs, *new_logprobs) if self.held_logprobs else new_logprobs
        first = produced == len(ids)  # nothing sent before
        if not (done or first) and self.batch_tier and coalescing and len(ids) < COALESCE_TOKENS:
            self.held, self.held_logprobs = list(ids), list(logprobs)  # sent with a later step's tokens
            return None
        self.held, self.held_logprobs = [], []
        return ids, logprobs


def end_span(live: LiveRequest, reason: str, error: bool = True) -> None:
    """The request is out of the engine: its engine span, if it has one, ends."""
    if live.span is not None:
        live.span.end(reason, error)
        live.span = None


def to_check(live: Iterable[LiveRequest], steps: int, coalescing: bool) -> Iterable[LiveRequest]:
    """The streams to ask about cancellation during step number `steps`: every one, but while
    coalescing only the batch-tier streams whose turn it is."""
    if not coalescing:
        return live
    turn = steps % CHECK_EVERY
    return (s for s in live if not s.batch_tier or s.check_turn == turn)
