"""The worker's Triton port is not an open door: without the platform's access key a direct call
(inference, model control, metadata, statistics) is refused, health stays open for probes; and even
with the key, naming a tenant is not enough to reach its prefix cache (its salt is an HMAC under a
secret only the frontend holds)."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as triton_aio
import tritonclient.http as httpclient
from tritonclient.grpc import InferRequestedOutput
from tritonclient.utils import InferenceServerException

from contracts import worker as wire
from frontend.dispatch.worker_client import WorkerChunk, WorkerRequest, build_inputs, parse_response
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from serving.triton import ACCESS_HEADER, GRPC_ACCESS_HEADER, TritonServer
from tests.e2e.conftest import auth
from tests.engine.helpers import LONG_TEXT

OUTPUTS = (wire.OUTPUT_IDS, wire.NUM_INPUT_TOKENS, wire.NUM_CACHED_TOKENS)
WRONG = {GRPC_ACCESS_HEADER: "not-the-key"}


def server_of(platform: Platform) -> TritonServer:
    assert platform.triton is not None
    return platform.triton


def model_of(platform: Platform) -> str:
    return platform.registry.resolve("smollm2-135m").triton_model_name


async def infer_directly(
    server: TritonServer, req: WorkerRequest, headers: dict[str, str] | None
) -> list[WorkerChunk]:
    """One streamed inference straight to the worker's gRPC port, as any local process could send
    it; the responses until FINAL. grpc.aio.AioRpcError when Triton refuses it."""
    client = triton_aio.InferenceServerClient(server.grpc_url)

    async def requests() -> AsyncIterator[dict[str, object]]:
        yield {
            "model_name": req.model,
            "inputs": build_inputs(req),
            "outputs": [InferRequestedOutput(name) for name in OUTPUTS],
            "request_id": req.generation_id,
        }

    chunks = []
    try:
        async for result, error in client.stream_infer(requests(), headers=headers):
            if error is not None:
                raise error
            chunks.append(parse_response(result))
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                break
    finally:
        await client.close()
    return chunks


def probe(
    platform: Platform,
    prompt_ids: tuple[int, ...],
    salt: str,
    temperature: float = 0.0,
    seed: int | None = None,
) -> WorkerRequest:
    return WorkerRequest(
        model_of(platform),
        prompt_ids,
        4,
        end_id=None,
        temperature=temperature,
        seed=seed,
        cache_salt=salt,
        generation_id="probe",
    )


@pytest.mark.parametrize("headers", [None, WRONG], ids=["no-key", "wrong-key"])
def test_inference_on_the_worker_port_without_the_key_is_refused(platform: Platform, headers) -> None:
    """A unary ModelInfer: Triton checks the key before anything else, and the refusal reaches the
    caller whole (on a bidirectional stream it can race the client's own send and surface as a
    client-side INTERNAL)."""
    client = grpcclient.InferenceServerClient(server_of(platform).grpc_url)
    req = probe(platform, (504, 3575, 282), "alpha")
    try:
        with pytest.raises(InferenceServerException, match="restricted") as e:
            client.infer(req.model, build_inputs(req), headers=headers)
        assert e.value.status() == "StatusCode.UNAVAILABLE"
    finally:
        client.close()


async def test_inference_with_the_key_runs(platform: Platform) -> None:
    server = server_of(platform)
    # a temperature the frontend would have made greedy reaches the engine as a denormal fp32
    chunks = await infer_directly(
        server, probe(platform, (504, 3575, 282), "probe", temperature=1e-45, seed=1), server.grpc_headers
    )
    assert chunks[0].num_input_tokens == 3
    assert sum(len(c.token_ids) for c in chunks) == 4


def test_model_control_metadata_and_statistics_need_the_key_and_health_does_not(platform: Platform) -> None:
    server, model = server_of(platform), model_of(platform)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        calls = {
            "unload": lambda h: client.unload_model(model, headers=h),
            "load": lambda h: client.load_model(model, headers=h),
            "repository index": lambda h: client.get_model_repository_index(headers=h),
            "model metadata": lambda h: client.get_model_metadata(model, headers=h),
            "model config": lambda h: client.get_model_config(model, headers=h),
            "statistics": lambda h: client.get_inference_statistics(model, headers=h),
            "server metadata": lambda h: client.get_server_metadata(headers=h),
        }
        for headers in (None, WRONG):
            for name, call in calls.items():
                with pytest.raises(InferenceServerException, match="restricted"):
                    call(headers)
                    pytest.fail(f"{name} answered without the key")
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready(model)
        index = client.get_model_repository_index(headers=server.grpc_headers, as_json=True)
        assert {"name": model, "version": "1", "state": "READY"} in index["models"]
    finally:
        client.close()
    http = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}")
    try:
        with pytest.raises(InferenceServerException, match="restricted"):
            http.unload_model(model)
        with pytest.raises(InferenceServerException, match="restricted"):
            http.get_model_repository_index(headers={ACCESS_HEADER: "not-the-key"})
        assert http.is_server_live() and http.is_model_ready(model)
        assert http.get_model_repository_index(
            headers={ACCESS_HEADER: server.grpc_headers[GRPC_ACCESS_HEADER]}
        )
    finally:
        http.close()


async def test_naming_a_tenant_does_not_reach_its_prefix_cache(channel, platform: Platform) -> None:
    """Issue 12 row 13: with cache_salt = the tenant's id, a direct call hit 48 of 53 prompt tokens
    of that tenant's prompt. Now only the salt the frontend derives would."""
    prompt = LONG_TEXT[3000:4200]
    stub = generations_pb2_grpc.GenerationsStub(channel)
    req = pb.GenerateRequest(model="smollm2-135m", prompt=prompt, max_output_tokens=2)
    events = [e async for e in stub.Generate(req, metadata=auth())]  # tenant alpha caches it
    assert events[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
    prompt_ids = tuple(platform.registry.resolve("smollm2-135m").tokenizer.encode(prompt))
    server = server_of(platform)
    assert platform.manager is not None
    named = await infer_directly(server, probe(platform, prompt_ids, "alpha"), server.grpc_headers)
    assert named[0].num_input_tokens == len(prompt_ids) > 200
    assert named[0].num_cached_tokens == 0
    salt = platform.manager.salts.for_tenant("alpha")  # only the frontend knows it
    derived = await infer_directly(server, probe(platform, prompt_ids, salt), server.grpc_headers)
    assert derived[0].num_cached_tokens is not None and derived[0].num_cached_tokens >= len(prompt_ids) - 16


def test_the_stubs_shared_memory_is_readable_by_the_workers_user_alone(platform: Platform) -> None:
    """Prompts and outputs pass through the Python backend's regions in /dev/shm, which it creates
    readable by every local user (0644): once its model is loaded, they are the owner's alone."""
    server = server_of(platform)
    regions = [p for p in Path("/dev/shm").iterdir() if p.name.startswith(server.shm_prefix)]
    assert regions, "the worker's stub has a shared-memory region"
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in regions} == {oct(0o600)}
    assert {p.stat().st_uid for p in regions} == {os.getuid()}
