"""The REST API over HTTP/JSON, driven with httpx against the session platform's HTTP listener: the
same calls as gRPC (a greedy generation is the same token for token), server-sent events numbered
by sequence and resumed with Last-Event-ID, the reads, cancel, usage, the errors' statuses and
reasons, a client that goes away cancelled after the same grace period, and the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from config.settings import FrontendSettings, HttpSettings
from frontend.calls import frontend_calls
from frontend.http.server import http_server
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import KEY_ALPHA, KEY_BETA, KEY_GAMMA, auth, disconnect_grace, interactive_allowance
from tests.e2e.test_admission import long_prompt
from tests.e2e.test_generate import generate, token_ids
from tests.e2e.tls_ca import make_ca

MODEL = "smollm2-135m"
ROOT = Path(__file__).resolve().parents[2]


def bearer(key: str = KEY_ALPHA) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The server-sent events of a streaming response: {"id", "event", "data"} each."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = json.loads(value.strip()) if name == "data" else value.strip()


async def stream_events(client: httpx.AsyncClient, body: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    async with client.stream("POST", "/v1/generations", json={**body, "stream": True}, **kw) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [e async for e in sse(r)]


@pytest.fixture
async def client(http_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=http_url, headers=bearer(), timeout=120) as c:
        yield c


async def test_a_greedy_generation_over_http_equals_grpc_token_for_token(client, channel) -> None:
    prompt = "The capital of France is"
    over_grpc = await generate(channel, pb.GenerateRequest(model=MODEL, prompt=prompt, max_output_tokens=24))
    r = await client.post("/v1/generations", json={"model": MODEL, "prompt": prompt, "maxOutputTokens": 24})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["tokenIds"] == token_ids(over_grpc)
    assert doc["text"] == "".join(e.delta.text for e in over_grpc if e.HasField("delta"))
    assert doc["finished"]["reason"] == "OUTPUT_LIMIT" and doc["finished"]["usageFinal"] is True
    assert doc["finished"]["usage"]["outputTokens"] == "24"  # uint64: a string, as protobuf's JSON has it
    assert doc["started"]["inputTokens"] == str(over_grpc[0].started.input_tokens)
    assert r.headers["x-generation-id"] == doc["generationId"]


async def test_the_seed_example_streams_one_event_per_generation_event(client) -> None:
    body = {"requestId": "http-seed-1", "model": MODEL, "input": "Once upon a time", "maxOutputTokens": 12}
    events = await stream_events(client, body)
    sequences = [int(e["data"]["sequence"]) for e in events]
    assert sequences == list(range(1, len(events) + 1))
    assert [int(e["id"]) for e in events] == sequences  # id: is the sequence (Last-Event-ID resumes it)
    kinds = [next(k for k in ("started", "delta", "usage", "finished") if k in e["data"]) for e in events]
    assert kinds[0] == "started" and kinds[-2:] == ["usage", "finished"]
    assert events[0]["data"]["started"]["requestId"] == "http-seed-1"
    # the same request id again re-attaches and replays the same stream
    again = await stream_events(client, body)
    assert [e["data"] for e in again] == [e["data"] for e in events]


async def test_chat_messages_as_a_list_and_as_the_proto_mapping_are_the_same_request(client) -> None:
    messages = [{"role": "user", "content": "What is 2+2?"}]
    as_list = await client.post(
        "/v1/generations", json={"model": MODEL, "messages": messages, "maxOutputTokens": 8}
    )
    as_proto = await client.post(
        "/v1/generations", json={"model": MODEL, "messages": {"messages": messages}, "max_output_tokens": 8}
    )
    assert as_list.status_code == as_proto.status_code == 200
    assert as_list.json()["tokenIds"] == as_proto.json()["tokenIds"]


async def test_resume_with_last_event_id_continues_with_no_gap_or_duplicate(
    client, platform: Platform
) -> None:
    body = {
        "requestId": "http-resume-1",
        "model": MODEL,
        "prompt": "Count to ten:",
        "maxOutputTokens": 40,
        "sampling": {"ignoreEos": True},
    }
    seen: list[dict[str, Any]] = []
    with disconnect_grace(platform, 120.0):  # back in time however busy the machine
        async with client.stream("POST", "/v1/generations", json={**body, "stream": True}) as r:
            generation_id = r.headers["x-generation-id"]
            async for event in sse(r):
                seen.append(event)
                if len(seen) == 5:
                    break  # the client goes away mid-stream
        headers = {"last-event-id": seen[-1]["id"]}
        async with client.stream("GET", f"/v1/generations/{generation_id}/events", headers=headers) as r:
            assert r.status_code == 200
            rest = [e async for e in sse(r)]
    sequences = [int(e["id"]) for e in seen + rest]
    assert sequences == list(range(1, len(sequences) + 1))
    assert "finished" in rest[-1]["data"]
    # a POST retry of the same request with Last-Event-ID resumes there too (an EventSource's retry)
    replay = await stream_events(client, body, headers={"last-event-id": "30"})
    assert [int(e["id"]) for e in replay] == list(range(31, sequences[-1] + 1))
    # nothing after the last event of an ended generation: 204, so an EventSource stops reconnecting
    done = await client.get(
        f"/v1/generations/{generation_id}/events", headers={"last-event-id": str(sequences[-1])}
    )
    assert done.status_code == 204
    # the REST resume by query parameter
    async with client.stream("GET", f"/v1/generations/{generation_id}/events?after=38") as r:
        assert [int(e["id"]) for e in [e async for e in sse(r)]] == list(range(39, sequences[-1] + 1))


async def test_get_by_id_and_request_id_cancel_and_usage(client) -> None:
    r = await client.post(
        "/v1/generations",
        json={"requestId": "http-get-1", "model": MODEL, "prompt": "Hi", "maxOutputTokens": 4},
    )
    generation_id = r.json()["generationId"]
    by_id = (await client.get(f"/v1/generations/{generation_id}")).json()
    by_request = (await client.get("/v1/generations", params={"requestId": "http-get-1"})).json()
    assert by_id == by_request
    assert by_id["state"] == "COMPLETED" and by_id["usage"]["outputTokens"] == "4" and by_id["usageFinal"]
    cancelled = await client.post(f"/v1/generations/{generation_id}:cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "COMPLETED"  # too late: harmless
    usage = (await client.get("/v1/usage")).json()
    assert usage["tenant"] == "alpha" and int(usage["outputTokens"]) >= 4 and int(usage["generations"]) >= 1
    window = await client.get(
        "/v1/usage", params={"windowStart": "2000-01-01T00:00:00Z", "windowEnd": "2001-01-01T00:00:00Z"}
    )
    assert window.json()["outputTokens"] == "0"


async def test_cancel_stops_a_running_generation(client) -> None:
    body = {"model": MODEL, "prompt": "Count:", "maxOutputTokens": 2000, "sampling": {"ignoreEos": True}}
    async with client.stream("POST", "/v1/generations", json={**body, "stream": True}) as r:
        generation_id = r.headers["x-generation-id"]
        events = sse(r)
        await anext(events)
        cancelled = await client.post(f"/v1/generations/{generation_id}:cancel")
        assert cancelled.json()["state"] == "CANCELED"
        rest = [e async for e in events]
    assert rest[-1]["data"]["finished"]["reason"] == "CANCELED"


async def test_models_list_serves_the_rest_and_openai_shapes(client, platform: Platform) -> None:
    doc = (await client.get("/v1/models")).json()
    version = platform.registry.resolve(MODEL)
    assert [v["id"] for v in doc["versions"]] == [version.version_id] and doc["versions"][0]["ready"]
    assert doc["aliases"][0]["alias"] == MODEL
    assert doc["object"] == "list" and {m["id"] for m in doc["data"]} == {MODEL, version.version_id}


async def test_a_client_that_goes_away_is_cancelled_after_the_grace_period(
    client, platform: Platform
) -> None:
    body = {"model": MODEL, "prompt": "Count:", "maxOutputTokens": 2000, "sampling": {"ignoreEos": True}}
    async with client.stream("POST", "/v1/generations", json={**body, "stream": True}) as r:
        generation_id = r.headers["x-generation-id"]
        events = sse(r)
        await anext(events)
        await anext(events)
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # grace is 0.5 s in the e2e config
        state = (await client.get(f"/v1/generations/{generation_id}")).json()
        if state["state"] != "RUNNING":
            break
        assert asyncio.get_running_loop().time() < deadline, "never cancelled"
        await asyncio.sleep(0.1)
    assert state["state"] == "CANCELED"
    assert platform.metrics is not None
    counted = platform.metrics.cancellations.labels("DISCONNECTED")._value.get()
    assert counted >= 1


async def error(response: httpx.Response, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()["error"]
    assert body["code"] == status and body["reason"] == reason
    assert any(d.get("reason") == reason for d in body["details"])  # the gRPC ErrorInfo, as JSON
    return body


async def test_errors_carry_the_grpc_reasons_and_conventional_statuses(http_url: str, client) -> None:
    async with httpx.AsyncClient(base_url=http_url) as anonymous:
        r = await anonymous.get("/v1/models")
        await error(r, 401, "UNAUTHENTICATED")
        assert r.headers["www-authenticate"].startswith("Bearer")
        await error(await anonymous.get("/v1/models", headers=bearer("wrong")), 401, "UNAUTHENTICATED")
        assert (await anonymous.get("/openapi.json")).status_code == 200  # no key needed
        assert (await anonymous.get("/healthz")).json() == {"status": "SERVING"}
    body = {"model": MODEL, "prompt": "Hi", "maxOutputTokens": 0}
    e = await error(await client.post("/v1/generations", json=body), 400, "INVALID_MAX_OUTPUT_TOKENS")
    assert e["status"] == "INVALID_ARGUMENT"
    await error(await client.post("/v1/generations", json={**body, "bogus": 1}), 400, "MALFORMED_REQUEST")
    await error(await client.post("/v1/generations", content=b"{not json"), 400, "MALFORMED_REQUEST")
    await error(
        await client.post("/v1/generations", json={"model": "nope", "prompt": "Hi", "maxOutputTokens": 1}),
        400,
        "UNKNOWN_MODEL",
    )
    big = {"model": MODEL, "prompt": "x" * (2 << 20), "maxOutputTokens": 1}
    assert (await client.post("/v1/generations", json=big)).status_code == 413
    # another tenant's generation does not exist for the caller
    mine = (await client.post("/v1/generations", json={**body, "maxOutputTokens": 2})).json()["generationId"]
    other = await client.get(f"/v1/generations/{mine}", headers=bearer(KEY_BETA))
    await error(other, 404, "GENERATION_NOT_FOUND")
    await error(await client.get("/v1/generations"), 400, "MISSING_KEY")
    # a request id used again with another request
    first = {"requestId": "http-conflict-1", "model": MODEL, "prompt": "Hi", "maxOutputTokens": 2}
    assert (await client.post("/v1/generations", json=first)).status_code == 200
    await error(
        await client.post("/v1/generations", json={**first, "maxOutputTokens": 3}), 409, "REQUEST_ID_CONFLICT"
    )
    await error(await client.get("/v1/usage", params={"tenant": "beta"}), 403, "TENANT_MISMATCH")
    await error(await client.get("/v1/nowhere"), 404, "NOT_FOUND")


async def test_a_quota_is_429_with_retry_after(http_url: str) -> None:
    """Gamma may run one generation at a time."""
    async with httpx.AsyncClient(base_url=http_url, headers=bearer(KEY_GAMMA), timeout=120) as gamma:
        body = {"model": MODEL, "prompt": "Count:", "maxOutputTokens": 2000, "sampling": {"ignoreEos": True}}
        async with gamma.stream("POST", "/v1/generations", json={**body, "stream": True}) as r:
            generation_id = r.headers["x-generation-id"]
            await anext(sse(r))
            refused = await gamma.post("/v1/generations", json={**body, "maxOutputTokens": 2})
            e = await error(refused, 429, "QUOTA_EXCEEDED")
            assert int(refused.headers["retry-after"]) >= 1
            assert any("QuotaFailure" in d["@type"] for d in e["details"])
            await gamma.post(f"/v1/generations/{generation_id}:cancel")


async def test_a_queue_deadline_is_503_with_retry_after(client, channel, platform: Platform) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    hog = stub.Generate(
        pb.GenerateRequest(model=MODEL, prompt=long_prompt(platform, 3000), max_output_tokens=2),
        metadata=auth(),
    )
    with interactive_allowance(platform, 0.2):
        try:
            assert (await hog.read()).HasField("started")  # admitted: its prefill is the backlog
            late = {"model": MODEL, "prompt": "Hello", "maxOutputTokens": 2, "stream": True}
            refused = await client.post("/v1/generations", json=late)
            await error(refused, 503, "QUEUE_DEADLINE")
            assert int(refused.headers["retry-after"]) >= 1
        finally:
            hog.cancel()


async def test_the_openapi_document_is_served_and_checked_in(client) -> None:
    served = (await client.get("/openapi.json")).json()
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert served == checked_in, "regenerate: python -m frontend.http.openapi > docs/openapi.json"
    for path in ("/v1/generations", "/v1/generations/{generation_id}/events", "/v1/chat/completions"):
        assert path in served["paths"]
    request = served["components"]["schemas"]["llm.v1.GenerateRequest"]["properties"]
    assert set(request) == {f.json_name for f in pb.GenerateRequest.DESCRIPTOR.fields}


async def test_the_http_listener_serves_tls_and_mutual_tls_from_the_grpc_settings(
    frontend_port: int, platform: Platform, tmp_path: Path
) -> None:
    assert platform.manager is not None
    pems = make_ca(tmp_path / "ca")
    tls = replace(FrontendSettings(), tls_cert_file=str(pems.server_cert), tls_key_file=str(pems.server_key))
    mutual = replace(tls, tls_client_ca_file=str(pems.ca))
    for settings in (tls, mutual):
        async with (
            frontend_calls(platform.registry, platform.manager, settings) as calls,
            http_server("127.0.0.1:0", calls, platform.keys, HttpSettings(), settings) as port,
        ):
            url = f"https://127.0.0.1:{port}/v1/models"
            trusting = ssl.create_default_context(cafile=str(pems.ca))
            if settings is mutual:
                async with httpx.AsyncClient(verify=trusting) as anonymous:
                    with pytest.raises(httpx.HTTPError):  # no client certificate: the handshake fails
                        (await anonymous.get(url, headers=bearer())).raise_for_status()
                trusting.load_cert_chain(str(pems.client_cert), str(pems.client_key))
            async with httpx.AsyncClient(verify=trusting) as client:
                assert (await client.get(url, headers=bearer())).json()["versions"]
