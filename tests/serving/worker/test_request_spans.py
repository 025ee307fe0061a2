"""Each admitted request's engine span (serving/worker/request_spans.py), against the adapter's
fakes: parented on the traceparent its parameters carry, a first_token event once, and ended once
on every path out of the engine with its output tokens and reason (an error status only where the
request failed). Ids and counts only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from serving.worker.adapter import WorkerAdapter
from serving.worker.request_spans import NoSpans, OtlpSpans, request_spans
from tests.serving.worker.fakes import Request, ScriptedEngine, make_adapter, turn
from tests.serving.worker.test_adapter import submit

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE}-{PARENT}-01"


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


@pytest.fixture
def adapter(exported: InMemorySpanExporter) -> WorkerAdapter:
    return make_adapter(spans=OtlpSpans(processor=SimpleSpanProcessor(exported)))


def ended(exported: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    spans = exported.get_finished_spans()
    by_id = {str((s.attributes or {})["llm.generation_id"]): s for s in spans}
    assert len(by_id) == len(spans), "a request's span ended twice"
    return by_id


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
    assert NoSpans().start("g1", TRACEPARENT, "INTERACTIVE", 3, 0) is None
    spans = request_spans("http://127.0.0.1:4318/v1/traces")
    assert isinstance(spans, OtlpSpans)
    spans.close()
