"""The OpenAI-compatible completions client: reading server-sent events, counting tokens, and how a
failed stream is named. Served by a scripted HTTP server on a loopback port (port 0)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome
from bench.load.workload import RequestSpec
from bench.peers.completions import DONE, Chunk, CompletionsTarget, finish_reason, sse_data


def test_server_sent_events_lines() -> None:
    assert sse_data(b'data: {"choices": [{"text": " the", "finish_reason": null}]}\n') == {
        "choices": [{"text": " the", "finish_reason": None}]
    }
    assert sse_data(b"data: [DONE]\n") == DONE
    assert sse_data(b"\n") is None and sse_data(b": ping\n") is None
    assert sse_data(b"data: [1, 2]\n") is None


def test_finish_reason_of_a_chunk() -> None:
    assert finish_reason({"choices": [{"text": "", "finish_reason": "length"}]}) == "length"
    assert finish_reason({"choices": [{"text": "a", "finish_reason": None}]}) is None
    assert finish_reason({"choices": []}) is None


def chunk(ids: list[int], reason: str | None = None) -> Chunk:
    return {"choices": [{"text": "x", "token_ids": ids, "finish_reason": reason}]}


@contextmanager
def scripted(status: int, events: list[Any]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An HTTP server answering every POST with `status` and `events` as server-sent events; it
    records the request bodies it received."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for ev in events:
                payload = ev if isinstance(ev, str) else json.dumps(ev)
                self.wfile.write(f"data: {payload}\n\n".encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def job() -> Job:
    return Job(RequestSpec(3, "interactive", 0, None, 2, 3), "ab", (1, 2))


def token_ids(c: Chunk) -> int:
    return len(c["choices"][0].get("token_ids") or [])


async def run(status: int, events: list[Any]) -> tuple[Outcome, list[dict[str, Any]]]:
    with scripted(status, events) as (url, bodies):
        target = CompletionsTarget("peer", url, lambda j: {"prompt": list(j.prompt_ids)}, token_ids)
        out = Outcome(3, "interactive", 0.0, 3)
        try:
            await target.generate(job(), out)
        finally:
            target.close()
        return out, bodies


async def test_each_chunk_with_tokens_is_one_delivery_of_that_many() -> None:
    out, bodies = await run(200, [chunk([7]), chunk([]), chunk([8, 9]), chunk([], "length"), DONE])
    assert [k for _, k in out.deliveries] == [1, 2]
    assert bodies == [{"prompt": [1, 2]}]


@pytest.mark.parametrize(
    ("status", "events", "expected"),
    [
        (200, [chunk([7]), chunk([8], "stop"), DONE], "FINISHED_STOP"),
        (200, [chunk([7])], "FINISHED_NONE"),  # the stream ended without a finish reason
        (200, [{"error": {"message": "boom"}}], "SERVER_ERROR"),
        (500, [], "HTTP_500"),
    ],
)
async def test_a_stream_that_does_not_end_at_its_length_fails_with_a_status(
    status: int, events: list[Any], expected: str
) -> None:
    with pytest.raises(TargetError) as e:
        await run(status, events)
    assert e.value.status == expected


async def test_an_unreachable_server_is_a_connection_failure() -> None:
    with scripted(200, []) as (url, _):
        pass  # the server is gone once the block ends
    target = CompletionsTarget("peer", url, lambda j: {}, token_ids, timeout_s=5)
    with pytest.raises(TargetError) as e:
        await target.generate(job(), Outcome(3, "interactive", 0.0, 3))
    target.close()
    assert e.value.status == "CONNECTION_FAILED"
