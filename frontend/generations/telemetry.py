"""One trace and one set of latency figures per generation, separating queue, prefill, decode,
delivery and billing time.

    generation (root: ids, tenant, pinned version, token counts, finish reason)
    ├── admission      request received -> recorded (validation, template, quotas, deadline)
    ├── queue          dispatch -> the worker's admission (waiting for room, worker queue)
    ├── prefill        worker admission -> first token (W3C trace context goes on to Triton)
    ├── first_token    first token -> its `delta` event appended
    ├── decode         first token -> last token
    ├── billing.flush  final usage flushed and acknowledged, attempt sealed
    └── delivery       one per client stream (Generate, Resume, Converse) following the events

Span attributes are ids, counts and reasons, never prompt or output text. The same marks feed the
Prometheus histograms (frontend/metrics.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from config.settings import TelemetrySettings
from contracts.tier import Tier
from frontend.metrics import FrontendMetrics
from llm.v1 import generations_pb2 as pb

_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(slots=True)
class GenerationObserver:
    tracer: Tracer
    metrics: FrontendMetrics
    tenant: str
    version: str
    root: Span
    received_s: float  # monotonic, when the request arrived
    _open: dict[str, Span] = field(default_factory=dict)
    _first_token_s: float | None = None
    _last_token_s: float | None = None
    ended: bool = False
    _per_token: tuple[Any, Any] | None = None  # (itl, tokens_out) children, labelled once

    def _token_metrics(self) -> tuple[Any, Any]:
        if self._per_token is None:
            self._per_token = (
                self.metrics.itl.labels(self.tenant, self.version),
                self.metrics.tokens_out.labels(self.tenant, self.version),
            )
        return self._per_token

    def _child(self, name: str, start_ns: int | None = None) -> Span:
        span = self.tracer.start_span(name, context=trace.set_span_in_context(self.root), start_time=start_ns)
        self._open[name] = span
        return span

    def _end(self, name: str) -> None:
        span = self._open.pop(name, None)
        if span is not None:
            span.end()

    def admitted(self, received_ns: int) -> None:
        self._child("admission", received_ns).end()
        self._open.pop("admission")

    def dispatching(self) -> dict[str, str]:
        """The queue span opens; returns the W3C trace-context headers for the worker request."""
        span = self._child("queue")
        headers: dict[str, str] = {}
        _PROPAGATOR.inject(headers, context=trace.set_span_in_context(span))
        return headers

    def worker_admitted(self, cached_tokens: int) -> None:
        self._end("queue")
        self.metrics.queue_time.labels(self.tenant).observe(time.monotonic() - self.received_s)
        self.root.set_attribute("llm.cached_input_tokens", cached_tokens)
        self._child("prefill")

    def tokens(self, count: int) -> None:
        now = time.monotonic()
        itl, tokens_out = self._token_metrics()
        if self._first_token_s is None:
            self._first_token_s = now
            self._end("prefill")
            self._child("first_token")
            self._child("decode")
            self.metrics.ttft.labels(self.tenant, self.version).observe(now - self.received_s)
        elif self._last_token_s is not None and count:
            itl.observe((now - self._last_token_s) / count)
        self._last_token_s = now
        tokens_out.inc(count)

    def delta_appended(self) -> None:
        self._end("first_token")

    def settling(self) -> None:
        self._end("first_token")
        self._end("decode")
        self._child("billing.flush")

    def finished(self, reason: pb.Finished.Reason, usage: pb.TokenUsage) -> None:
        if self.ended:
            return
        self.ended = True
        for name in list(self._open):
            if name != "billing.flush":
                self._end(name)
        self._end("billing.flush")
        name = pb.Finished.Reason.Name(reason)
        self.root.set_attribute("llm.finish_reason", name)
        self.root.set_attribute("llm.output_tokens", usage.output_tokens)
        self.root.set_attribute("llm.cached_input_tokens", usage.cached_input_tokens)
        if reason in (pb.Finished.Reason.FAILED, pb.Finished.Reason.INTERRUPTED):
            self.root.set_status(Status(StatusCode.ERROR, name))
        labels = (self.tenant, self.version)
        self.metrics.tokens_in.labels(*labels).inc(usage.input_tokens)
        self.metrics.tokens_cached.labels(*labels).inc(usage.cached_input_tokens)
        elapsed = time.monotonic() - self.received_s
        self.metrics.duration.labels(self.tenant, self.version, name).observe(elapsed)
        self.metrics.active.labels(self.tenant).dec()
        self.root.end()

    def refused(self, reason: str) -> None:
        """No worker took it (or the run failed): the generation ends without `finished`."""
        if self.ended:
            return
        self.ended = True
        for name in list(self._open):
            self._end(name)
        self.root.set_status(Status(StatusCode.ERROR, reason))
        self.root.set_attribute("llm.refused", reason)
        self.metrics.active.labels(self.tenant).dec()
        self.root.end()

    def delivery(self, kind: str, after_sequence: int) -> Span:
        """A span for one client stream following the events (ended by the caller)."""
        span = self.tracer.start_span(kind, context=trace.set_span_in_context(self.root))
        span.set_attribute("llm.after_sequence", after_sequence)
        return span


def observe_generation(
    tracer: Tracer,
    metrics: FrontendMetrics,
    *,
    generation_id: str,
    request_id: str,
    tenant: str,
    version: str,
    prompt_tokens: int,
    max_output_tokens: int,
    tier: Tier,
    received_ns: int,
    received_s: float,
) -> GenerationObserver:
    root = tracer.start_span(
        "generation",
        start_time=received_ns,
        attributes={
            "llm.generation_id": generation_id,
            "llm.request_id": request_id,
            "llm.tenant": tenant,
            "llm.model_version": version,
            "llm.input_tokens": prompt_tokens,
            "llm.max_output_tokens": max_output_tokens,
            "llm.tier": tier.name,
        },
    )
    metrics.active.labels(tenant).inc()
    observer = GenerationObserver(tracer, metrics, tenant, version, root, received_s)
    observer.admitted(received_ns)
    return observer


def tracer_provider(cfg: TelemetrySettings, extra: SpanProcessor | None) -> TracerProvider:
    """The frontend's tracer provider: OTLP/HTTP when configured, console when asked, `extra`."""
    provider = TracerProvider(resource=Resource.create({"service.name": "llm-frontend"}))
    if cfg.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=cfg.otlp_endpoint)))
    if cfg.console_traces:
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    if extra is not None:
        provider.add_span_processor(extra)
    return provider
