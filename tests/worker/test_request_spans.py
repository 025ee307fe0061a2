"""Each admitted request's engine span (worker/request_spans.py), against the adapter's
fakes: parented on the traceparent its parameters carry, a first_token event once, and ended once
on every path out of the engine with its output tokens and reason (an error status only where the
request failed). Ids and counts only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import ClassVar

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.worker.fakes import Request, ScriptedEngine, make_adapter, turn
from tests.worker.test_adapter import submit
from worker.adapter import WorkerAdapter
from worker.outbox import Stream
from worker.protocol import Request as RequestOf
from worker.protocol import Response
from worker.request_spans import NoSpans, OtlpSpans, RequestSpan, request_spans

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


class Counted:
    """A request's span, counting the adapter's end() calls (the SDK ignores a second one)."""

    ends: ClassVar[Counter[str]] = Counter()

    def __init__(self, rid: str, span: RequestSpan) -> None:
        self.rid, self.span = rid, span

    def produced(self, output_tokens: int) -> None:
        self.span.produced(output_tokens)

    def end(self, reason: str, error: bool = False) -> None:
        Counted.ends[self.rid] += 1
        self.span.end(reason, error)


class CountedSpans(OtlpSpans):
    def start(self, request: RequestOf, tier: str, prompt: int, cached: int) -> RequestSpan | None:
        span = super().start(request, tier, prompt, cached)
        return None if span is None else Counted(request.request_id(), span)


@pytest.fixture
def adapter(exported: InMemorySpanExporter) -> WorkerAdapter:
    Counted.ends.clear()
    return make_adapter(spans=CountedSpans(processor=SimpleSpanProcessor(exported)))


def ended(exported: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The spans ended so far, by generation id; each was ended once."""
    spans = {str((s.attributes or {})["llm.generation_id"]): s for s in exported.get_finished_spans()}
    assert Counted.ends == Counter(dict.fromkeys(spans, 1)), "a request's span ended twice, or not once"
    return spans


def request(rid: str, out: int = 3, trace: str = TRACEPARENT, streaming: bool = True) -> Request:
    r = Request(rid, streaming=streaming, out=out)
    r.trace = trace
    return r


def test_a_finished_request_has_one_engine_span_in_the_frontends_trace(
    adapter: WorkerAdapter, exported: InMemorySpanExporter
) -> None:
    submit(adapter, request("g1"))
    turn(adapter, 2)
    assert ended(exported) == {}  # still in the engine
    turn(adapter)
    span = ended(exported)["g1"]
    assert span.name == "engine" and span.resource.attributes["service.name"] == "llm-worker"
    assert span.context is not None and f"{span.context.trace_id:032x}" == TRACE
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT
    assert dict(span.attributes or {}) == {
        "llm.generation_id": "g1", "llm.tier": "INTERACTIVE", "llm.prompt_tokens": 3,
        "llm.cached_tokens": 1, "llm.output_tokens": 3, "llm.finish_reason": "LENGTH",
    }  # fmt: skip
    assert [e.name for e in span.events] == ["first_token"]
    assert span.status.status_code is StatusCode.UNSET


def test_a_request_without_trace_context_gets_a_trace_of_its_own(
    adapter: WorkerAdapter, exported: InMemorySpanExporter
) -> None:
    submit(adapter, request("g1", out=1, trace=""), request("g2", out=1, trace="not a traceparent"))
    turn(adapter)
    spans = ended(exported)
    assert spans["g1"].parent is None and spans["g2"].parent is None
    assert spans["g1"].context.trace_id != spans["g2"].context.trace_id


def test_a_request_whose_trace_context_is_not_sampled_exports_no_span(
    adapter: WorkerAdapter, exported: InMemorySpanExporter
) -> None:
    """The supervisor's canaries say not sampled (flags 00, serving/probes.py): an idle platform's
    canaries, one every probe interval, send the collector nothing; a traced request still does."""
    submit(adapter, request("canary-w-1", out=1, trace=f"00-{TRACE}-{PARENT}-00"), request("g1", out=1))
    turn(adapter)
    assert [str((s.attributes or {})["llm.generation_id"]) for s in exported.get_finished_spans()] == ["g1"]


def test_a_cancelled_request_ends_its_span_aborted_with_the_tokens_it_had(
    adapter: WorkerAdapter, exported: InMemorySpanExporter
) -> None:
    a = request("a", out=5)
    submit(adapter, a)
    turn(adapter)
    a.cancelled = True
    turn(adapter, 2)  # seen during this step, aborted at the next boundary (test_adapter.py)
    span = ended(exported)["a"]
    attributes = span.attributes or {}
    assert (attributes["llm.finish_reason"], attributes["llm.output_tokens"]) == ("ABORTED", 2)
    assert span.status.status_code is StatusCode.UNSET


def test_failures_end_their_spans_with_an_error_status(
    adapter: WorkerAdapter, exported: InMemorySpanExporter
) -> None:
    """The engine failing one request, a sender raising (a broken stream), and a failed step that
    ends the rest: each span ends once, with the reason."""
    engine = adapter.engine
    assert isinstance(engine, ScriptedEngine)
    alone, broken, rest = request("alone", out=5), request("broken", out=5), request("rest", out=5)
    submit(adapter, alone, broken, rest)
    turn(adapter)
    engine.fail_request["alone"] = "SamplingError"
    broken.sender.failures.append(RuntimeError("stub gone"))
    turn(adapter, 2)
    engine.fail_step = RuntimeError("boom")
    turn(adapter)
    spans = ended(exported)
    reasons = {rid: (spans[rid].attributes or {})["llm.finish_reason"] for rid in spans}
    assert reasons == {"alone": "ERROR", "broken": "BROKEN_STREAM", "rest": "INTERNAL_ERROR"}
    assert all(s.status.status_code is StatusCode.ERROR for s in spans.values())


def test_a_request_whose_last_response_cannot_be_posted_ends_its_span_failed(
    adapter: WorkerAdapter, exported: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine finished it, but its answer never left: the client gets an internal error, and
    the span says so, not LENGTH."""
    send, refused = adapter.outbox.send, list[str]()

    def send_once_refused(stream: Stream, response: Response, final: bool) -> None:
        if final and stream.rid == "g1" and not refused:
            refused.append(stream.rid)
            raise RuntimeError("outbox is closed")
        send(stream, response, final)

    monkeypatch.setattr(adapter.outbox, "send", send_once_refused)
    g1 = request("g1", out=2)
    submit(adapter, g1)
    turn(adapter, 2)
    assert g1.sent[-1] == ("internal error: RuntimeError", True)
    span = ended(exported)["g1"]
    attributes = span.attributes or {}
    assert (attributes["llm.finish_reason"], attributes["llm.output_tokens"]) == ("INTERNAL_ERROR", 2)
    assert span.status.status_code is StatusCode.ERROR


def test_unloading_ends_every_live_span(adapter: WorkerAdapter, exported: InMemorySpanExporter) -> None:
    submit(adapter, request("g1", out=5), request("g2", out=5, streaming=False))
    turn(adapter)
    adapter.close()
    spans = ended(exported)
    assert {rid: (s.attributes or {})["llm.finish_reason"] for rid, s in spans.items()} == {
        "g1": "UNLOADING",
        "g2": "UNLOADING",
    }
    assert {rid: (s.attributes or {})["llm.output_tokens"] for rid, s in spans.items()} == {"g1": 1, "g2": 1}


def test_spans_are_off_without_a_traces_url() -> None:
    assert isinstance(request_spans(""), NoSpans)
    asked = request("g1")
    asked.traceparent = lambda: pytest.fail("read with spans off")  # type: ignore[method-assign]
    assert NoSpans().start(asked, "INTERACTIVE", 3, 0) is None
    spans = request_spans("http://127.0.0.1:4318/v1/traces")
    assert isinstance(spans, OtlpSpans)
    spans.close()
