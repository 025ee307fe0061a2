"""Worker spans join the generation's trace: the frontend passes W3C trace context to Triton,
which exports its own spans over OTLP/HTTP to the same collector (a small receiver here).

Triton 2.51 sometimes starts a trace of its own for a request whose stream overlaps another
stream, its `traceparent` unread: 2 of 72 requests, 8 generations at a time, and 2 of 64 from the
worker client alone, 8 streams at a time each with a traceparent of its own (2026-12-06); a CI run
failed here when the supervisor's first canary overlapped the test's request. So this test turns
the canaries off (a probe interval longer than the test) and checks one request alone: that the
frontend sends the context and Triton joins it. README.md says what that means for operators."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from frontend.settings import TelemetrySettings
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import auth, platform_config


class Collector:
    """Every span received, as (service name, trace id hex, span name, attributes)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, dict[str, str]]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if "json" in self.headers.get("Content-Type", ""):
                    collector.spans.extend(_from_json(json.loads(body)))  # ids are hex there
                else:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    collector.spans.extend(_from_proto(request))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/v1/traces"


def _from_proto(request: ExportTraceServiceRequest) -> Iterator[tuple[str, str, str, dict[str, str]]]:
    for rs in request.resource_spans:
        service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
        for ss in rs.scope_spans:
            for span in ss.spans:
                attributes = {a.key: str(a.value) for a in span.attributes}
                yield service, span.trace_id.hex(), span.name, attributes


def _from_json(doc: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, str]]]:
    for rs in doc.get("resourceSpans", []):
        resource = rs.get("resource", {}).get("attributes", [])
        service = next(
            (a["value"].get("stringValue", "") for a in resource if a["key"] == "service.name"), ""
        )
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                attributes = {a["key"]: str(a.get("value")) for a in span.get("attributes", [])}
                yield service, span["traceId"].lower(), span["name"], attributes


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.server.shutdown()


async def test_worker_spans_join_the_generation_trace(
    collector: Collector, tmp_path: Path, artifact_dir: Path
) -> None:
    cfg = platform_config(tmp_path / "control.sqlite")
    cfg = replace(
        cfg,
        telemetry=TelemetrySettings(otlp_endpoint=collector.url),
        frontend=replace(cfg.frontend, worker_probe_interval_s=3600.0),  # no canary beside ours
    )
    platform = Platform(cfg, work_dir=tmp_path / "triton")
    await asyncio.to_thread(platform.start_workers)
    try:
        async with (
            platform.frontend("127.0.0.1:0") as (_, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            stub = generations_pb2_grpc.GenerationsStub(channel)
            req = pb.GenerateRequest(model="smollm2-135m", prompt="Hi", max_output_tokens=3)
            events = [e async for e in stub.Generate(req, metadata=auth(), timeout=60)]
            gid = events[0].generation_id
            platform.tracer_provider.force_flush()
            deadline = asyncio.get_running_loop().time() + 120  # only a lost export fails
            while True:
                roots = [
                    s
                    for s in collector.spans
                    if s[2] == "generation" and gid in s[3].get("llm.generation_id", "")
                ]
                # this request's worker spans: Triton names the request id (the generation id) on
                # its model span
                ours = [
                    s
                    for s in collector.spans
                    if s[0] == "llm-worker" and gid in s[3].get("triton.request_id", "")
                ]
                if (roots and ours) or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.5)
            assert roots, "the frontend exported no generation span"
            worker = sorted(
                {
                    (s[2], s[1], s[3].get("triton.request_id", ""))
                    for s in collector.spans
                    if s[0] == "llm-worker"
                }
            )
            assert ours, f"the worker exported no span of request {gid}; its spans: {worker}"
            assert {s[1] for s in ours} == {roots[0][1]}, (
                f"request {gid}'s worker spans are not in its generation's trace {roots[0][1]}: {worker}"
            )
    finally:
        await asyncio.to_thread(platform.stop_workers)
