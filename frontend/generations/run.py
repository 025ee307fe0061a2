"""One generation's event stream: worker responses in, ordered GenerationEvents out.

    started -> delta ... (usage every N tokens or T seconds) ... -> usage -> finished

`started` is sent once the worker has admitted the request (so a worker that cannot take it yields
UNAVAILABLE, not a half-open stream) and carries the prefix-cache hit. Sequence numbers start at 1
and increase by one per event. Text is detokenized incrementally (never splitting a UTF-8
character) and passed through the stop-string matcher; a stop string ends the generation and
cancels the worker request.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from contracts.capacity import blocks_for
from contracts.tier import Tier
from frontend.catalog.registry import ServedVersion
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.fair_queue import Ticket
from frontend.dispatch.prefix_routing import PromptPrefix
from frontend.dispatch.worker_client import WorkerChunk, WorkerError, WorkerLost, WorkerRequest
from frontend.generations.stops import StopMatcher
from frontend.generations.validation import GenerationParams
from llm.v1 import generations_pb2 as pb

Reason = pb.Finished.Reason


@dataclass(slots=True)
class GenerationRun:
    generation_id: str
    request_id: str
    version: ServedVersion
    prompt_ids: tuple[int, ...]
    params: GenerationParams
    cache_salt: str  # the tenant's prefix-cache scope (frontend/generations/cache_salt.py)
    tenant_weight: float = 1.0
    tier: Tier = Tier.INTERACTIVE
    epoch: int = 1
    _sequence: int = 0
    output_ids: list[int] = field(default_factory=list)
    cached_input_tokens: int = 0
    delivered_tokens: int = 0
    worker_id: str = ""  # the worker that admitted it
    trace_headers: tuple[tuple[str, str], ...] = ()  # W3C trace context passed to the worker
    usage_every_tokens: int = 32  # a cumulative `usage` event after this many new output tokens
    usage_every_s: float = 2.0  # ... or after this long with new tokens, whichever comes first
    ended: bool = False  # its closing events (usage, finished) have been made
    _usage_at: tuple[int, float] = (0, 0.0)  # output tokens and monotonic time of the last one

    def _event(self, **kind: Any) -> pb.GenerationEvent:
        self._sequence += 1
        return pb.GenerationEvent(
            generation_id=self.generation_id, epoch=self.epoch, sequence=self._sequence, **kind
        )

    def usage(self) -> pb.TokenUsage:
        """Cumulative: the prompt counts as processed once a worker admitted it."""
        return pb.TokenUsage(
            input_tokens=len(self.prompt_ids) if self.worker_id else 0,
            cached_input_tokens=self.cached_input_tokens,
            output_tokens=len(self.output_ids),
            delivered_output_tokens=self.delivered_tokens,
        )

    def ticket(self, tenant_id: str, block_size: int) -> Ticket:
        return Ticket(
            generation_id=self.generation_id,
            tenant_id=tenant_id,
            weight=self.tenant_weight,
            tier=self.tier,
            prompt_tokens=len(self.prompt_ids),
            blocks=blocks_for(len(self.prompt_ids) + self.params.max_output_tokens, block_size),
            prefix=PromptPrefix(self.prompt_ids, self.cache_salt),
        )

    def worker_request(self) -> WorkerRequest:
        p = self.params
        return WorkerRequest(
            model=self.version.triton_model_name,
            prompt_ids=self.prompt_ids,
            max_output_tokens=p.max_output_tokens,
            end_id=None if p.ignore_eos else self.version.eos_token_id,
            temperature=p.temperature,
            top_k=p.top_k,
            top_p=p.top_p,
            seed=p.seed,
            generation_id=self.generation_id,
            epoch=self.epoch,
            cache_salt=self.cache_salt,
            tenant_weight=self.tenant_weight,
            tier=self.tier,
            trace_headers=self.trace_headers,
            guide=p.guide,
            logprobs=p.logprobs,
            top_logprobs=p.top_logprobs,
        )

    async def events(
        self, dispatcher: Dispatcher, ticket: Ticket, on_assigned: Callable[[], Awaitable[None]]
    ) -> AsyncGenerator[pb.GenerationEvent, None]:
        """The stream; raises ApiError (before any event) when no worker admits the request.
        `on_assigned` runs once a worker has room, before the request is sent (it sets the epoch)."""
        version_id = self.version.version_id
        async with dispatcher.dispatch(ticket, self.worker_request, version_id, on_assigned) as d:
            self.worker_id = d.worker.worker_id
            first = d.first
            if first.num_cached_tokens is not None:
                self.cached_input_tokens = first.num_cached_tokens
            yield self._event(
                started=pb.Started(
                    model_version=self.version.version_id,
                    input_tokens=len(self.prompt_ids),
                    cached_input_tokens=self.cached_input_tokens,
                    request_id=self.request_id,
                    quantization=self.version.manifest.quantization,
                )
            )
            detok = self.version.tokenizer.detokenizer()
            stops = StopMatcher(self.params.stop)
            reason = Reason.INTERRUPTED
            pending = [first] if first.token_ids else []
            try:
                async for chunk in _chain(pending, d.chunks):
                    new_ids = chunk.token_ids
                    if not self.output_ids and new_ids:
                        dispatcher.started(ticket, self.cached_input_tokens)
                    self.output_ids.extend(new_ids)
                    result = stops.feed("".join(detok.step(t) for t in new_ids))
                    self.delivered_tokens += len(new_ids)
                    delta = pb.Delta(text=result.emit, token_ids=new_ids, logprobs=self._logprobs(chunk))
                    yield self._event(delta=delta)
                    if self._usage_due():
                        yield self._event(usage=pb.UsageUpdate(usage=self.usage()))
                    if result.stopped:
                        reason = Reason.STOP_SEQUENCE
                        break
                else:
                    reason = self._natural_reason()
            except WorkerLost:
                reason = Reason.INTERRUPTED
            except WorkerError:
                reason = Reason.FAILED
            if reason in (Reason.COMPLETED, Reason.OUTPUT_LIMIT):
                tail = stops.flush()
                if tail:
                    yield self._event(delta=pb.Delta(text=tail))
        for event in self.closing_events(reason):
            yield event

    def _logprobs(self, chunk: WorkerChunk) -> list[pb.TokenLogprob]:
        """The chunk's tokens' log-probabilities as the API's messages (none unless asked for)."""
        tokenizer = self.version.tokenizer

        def named(token_id: int) -> tuple[str, bytes]:
            raw = tokenizer.token_bytes(token_id)
            return raw.decode(errors="replace"), raw

        out = []
        for token_id, lp in zip(chunk.token_ids, chunk.logprobs, strict=False):
            text, raw = named(token_id)
            top = [
                pb.TopLogprob(token_id=t, token=named(t)[0], bytes=named(t)[1], logprob=v) for t, v in lp.top
            ]
            out.append(
                pb.TokenLogprob(
                    token_id=token_id, token=text, bytes=raw, logprob=lp.logprob, top_logprobs=top
                )
            )
        return out

    def _usage_due(self) -> bool:
        tokens, at = self._usage_at
        now = time.monotonic()
        new = len(self.output_ids) - tokens
        if at == 0.0:
            self._usage_at = (tokens, now)
            at = now
        if new >= self.usage_every_tokens or (new > 0 and now - at >= self.usage_every_s):
            self._usage_at = (len(self.output_ids), now)
            return True
        return False

    def closing_events(self, reason: pb.Finished.Reason) -> list[pb.GenerationEvent]:
        """The last two events: cumulative usage, then `finished` (usage is final unless the
        attempt was lost or failed)."""
        self.ended = True
        usage = self.usage()
        final = reason not in (Reason.INTERRUPTED, Reason.FAILED)
        return [
            self._event(usage=pb.UsageUpdate(usage=usage)),
            self._event(finished=pb.Finished(reason=reason, usage=usage, usage_final=final)),
        ]

    def _natural_reason(self) -> pb.Finished.Reason:
        """Why the worker ended the request on its own."""
        if (
            not self.params.ignore_eos
            and self.output_ids
            and self.output_ids[-1] == self.version.eos_token_id
        ):
            return Reason.COMPLETED
        if len(self.output_ids) >= self.params.max_output_tokens:
            return Reason.OUTPUT_LIMIT
        return Reason.INTERRUPTED


async def _chain(first: list[WorkerChunk], rest: AsyncIterator[WorkerChunk]) -> AsyncIterator[WorkerChunk]:
    for chunk in first:
        yield chunk
    async for chunk in rest:
        yield chunk
