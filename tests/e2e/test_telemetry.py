"""Traces and metrics after real traffic: one trace per generation with the span tree and
attributes (never text), and the frontend's Prometheus endpoint moving as it should."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import SPANS, auth
from tests.e2e.worker_metrics import frontend_scrape

PROMPT = "The lighthouse keeper counted the ships"


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def times(span: ReadableSpan) -> tuple[int, int]:
    assert span.start_time is not None and span.end_time is not None
    return span.start_time, span.end_time


CHILDREN = {"admission", "queue", "prefill", "first_token", "decode", "billing.flush", "delivery"}


async def test_one_trace_per_generation_with_its_span_tree(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(
        model="smollm2-135m", prompt=PROMPT, max_output_tokens=6, sampling=pb.SamplingParams(ignore_eos=True)
    )
    events = [e async for e in stub.Generate(req, metadata=auth(), timeout=60)]
    gid = events[0].generation_id
    async with asyncio.timeout(120):  # a hang guard: the delivery span ends when the RPC's done callback runs
        while True:
            spans = SPANS.get_finished_spans()
            roots = [s for s in spans if s.name == "generation" and attrs(s)["llm.generation_id"] == gid]
            ids = {r.context.span_id for r in roots}
            children = [s for s in spans if s.parent is not None and s.parent.span_id in ids]
            if roots and {s.name for s in children} >= CHILDREN:
                break
            await asyncio.sleep(0.1)
    (root,) = roots
    assert sorted(s.name for s in children) == sorted(CHILDREN)
    assert all(s.context.trace_id == root.context.trace_id for s in children)
    got = attrs(root)
    assert got["llm.tenant"] == "alpha" and str(got["llm.model_version"]).startswith("smollm2-135m@")
    assert got["llm.output_tokens"] == 6 and got["llm.finish_reason"] == "OUTPUT_LIMIT"
    assert got["llm.input_tokens"] == events[0].started.input_tokens
    by_name = {s.name: s for s in children}
    order = ["admission", "queue", "prefill", "decode"]
    for earlier, later in itertools.pairwise(order):
        assert times(by_name[earlier])[1] <= times(by_name[later])[0], (earlier, later)
    assert times(by_name["billing.flush"])[0] >= times(by_name["decode"])[1]
    text = "".join(e.delta.text for e in events)
    for span in [root, *children]:  # ids, counts and reasons only
        for value in attrs(span).values():
            assert PROMPT not in str(value) and (not text or text not in str(value))


async def test_metrics_move_with_traffic(channel, platform: Platform) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    version = platform.registry.resolve("smollm2-135m").version_id
    labels = f'model_version="{version}",tenant="beta"'
    before = frontend_scrape(platform)
    req = pb.GenerateRequest(
        model="smollm2-135m",
        prompt="Hello there",
        max_output_tokens=5,
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    events = [e async for e in stub.Generate(req, metadata=auth("key-beta"), timeout=60)]
    after = frontend_scrape(platform)

    def moved(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    assert moved(f"llm_time_to_first_token_seconds_count{{{labels}}}") == 1
    assert moved(f"llm_output_tokens_total{{{labels}}}") == 5
    assert moved(f"llm_input_tokens_total{{{labels}}}") == events[0].started.input_tokens
    assert moved(f"llm_inter_token_latency_seconds_count{{{labels}}}") >= 1
    assert moved('llm_queue_seconds_count{tenant="beta"}') == 1
    assert moved(f'llm_request_duration_seconds_count{{finish_reason="OUTPUT_LIMIT",{labels}}}') == 1
    assert after['llm_active_generations{tenant="beta"}'] == 0
    share = {k: v for k, v in after.items() if k.startswith("llm_decode_token_share")}
    assert abs(sum(share.values()) - 1.0) < 1e-9 and share['llm_decode_token_share{tenant="beta"}'] > 0

    # its log closed before its stream ended: it is kept for Resume, within the byte budget
    assert after["llm_retained_streams"] >= 1 and after["llm_retained_stream_bytes"] > 0
    assert moved("llm_retained_streams_evicted_total") == 0
    resumed = pb.ResumeRequest(generation_id=events[-1].generation_id, after_sequence=events[-1].sequence)
    assert [e async for e in stub.Resume(resumed, metadata=auth("key-beta"), timeout=60)] == []
    # the worker's own metrics, relayed with a worker label
    relayed = [k for k in after if k.startswith("llm_worker_kv_blocks") and 'worker="local-0"' in k]
    assert relayed, sorted(after)[:20]
