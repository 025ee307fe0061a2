"""The engine's own span of each request it admits, exported over OTLP/HTTP beside Triton's.

    engine   admitted by the engine -> its last response posted; a `first_token` event when its
             first token is posted; attributes: llm.generation_id (the request id), llm.tier,
             llm.prompt_tokens, llm.cached_tokens, then llm.output_tokens and llm.finish_reason

Its parent is the frontend's `queue` span, named by the W3C `traceparent` the frontend puts in the
request's parameters (frontend/dispatch/worker_client.py), not in the gRPC headers: Triton 2.51 leaves an
overlapping stream's `traceparent` header unread now and then (2 of 72 requests, 8 generations at a
time), and its own InferRequest/compute spans then form a trace of their own. A parameter travels
in the request itself, so the engine span is always in its generation's trace. A request without
one (a client other than the frontend) gets a trace of its own.

Spans start and end on the engine loop's thread; a batch processor's thread exports them. Ids,
counts and reasons only: never prompt or output text.
"""

from __future__ import annotations

import threading
from typing import Protocol

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from worker.protocol import Request

SERVICE = "llm-worker"  # Triton's own spans name the same service (serving/triton_host.py)
_PROPAGATOR = TraceContextTextMapPropagator()
EXPORT_TIMEOUT_S = 2.0  # one export's, retries included
CLOSE_TIMEOUT_S = 3.0  # the longest close() waits for what is queued to be exported


class RequestSpan(Protocol):
    def produced(self, output_tokens: int) -> None:
        """The request has `output_tokens` in all now (its first: the first_token event)."""
        ...

    def end(self, reason: str, error: bool = False) -> None: ...


class RequestSpans(Protocol):
    def start(self, request: Request, tier: str, prompt: int, cached: int) -> RequestSpan | None:
        """The engine span of a request just admitted (None: spans are off); its id and trace
        context are read only when spans are on."""
        ...

    def close(self) -> None:
        """Exports what is left; no span starts after."""
        ...


class NoSpans:
    """Spans off (no traces URL)."""

    def start(self, request: Request, tier: str, prompt: int, cached: int) -> RequestSpan | None:
        return None

    def close(self) -> None:
        pass


class _EngineSpan:
    __slots__ = ("_span", "_tokens")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._tokens = 0

    def produced(self, output_tokens: int) -> None:
        if not self._tokens and output_tokens:
            self._span.add_event("first_token")
        self._tokens = output_tokens

    def end(self, reason: str, error: bool = False) -> None:
        self._span.set_attribute("llm.output_tokens", self._tokens)
        self._span.set_attribute("llm.finish_reason", reason)
        if error:
            self._span.set_status(Status(StatusCode.ERROR, reason))
        self._span.end()


class OtlpSpans:
    """Engine spans to `url` (an OTLP/HTTP traces endpoint), or to `processor` (tests)."""

    def __init__(self, url: str = "", processor: SpanProcessor | None = None) -> None:
        if processor is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S))
        self._provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("llm.worker")

    def start(self, request: Request, tier: str, prompt: int, cached: int) -> RequestSpan | None:
        try:
            traceparent = request.traceparent()
            parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
            span = self._tracer.start_span("engine", context=parent)
            span.set_attributes({"llm.generation_id": request.request_id(), "llm.tier": tier})
            span.set_attributes({"llm.prompt_tokens": prompt, "llm.cached_tokens": cached})
        except Exception:  # a span is never worth a request
            return None
        return _EngineSpan(span)

    def close(self) -> None:
        # what is queued is exported, for at most CLOSE_TIMEOUT_S: a collector that drops
        # connections would otherwise hold a model's unload for the processor's 30 s
        closing = threading.Thread(target=self._provider.shutdown, name="engine-spans-close", daemon=True)
        closing.start()
        closing.join(CLOSE_TIMEOUT_S)


def request_spans(url: str) -> RequestSpans:
    """Engine spans exported to `url` ("": none)."""
    return OtlpSpans(url) if url else NoSpans()
