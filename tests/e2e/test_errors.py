"""Every error a client can hit: the gRPC status, the ErrorInfo reason, and nothing streamed."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_status import rpc_status

from frontend.api_errors import error_info
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc, models_pb2, models_pb2_grpc
from tests.e2e.conftest import auth


async def expect_error(call_factory, code: grpc.StatusCode, reason: str | None) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as e:
        result = call_factory()
        if hasattr(result, "__aiter__"):
            async for event in result:
                pytest.fail(f"no event may be streamed before the error, got {event.WhichOneof('event')}")
        else:
            await result
    assert e.value.code() == code, e.value.details()
    if reason is not None:
        status = rpc_status.from_call(e.value)
        assert status is not None
        info = error_info(status)
        assert info is not None and info.reason == reason and info.domain == "llm.v1"
    return e.value


def good(**kw: object) -> pb.GenerateRequest:
    req = pb.GenerateRequest(model="smollm2-135m", prompt="Hello", max_output_tokens=4)
    for k, v in kw.items():
        if k == "sampling":
            req.sampling.CopyFrom(v)
        else:
            setattr(req, k, v)
    return req


@pytest.mark.parametrize(
    "metadata", [(), (("authorization", "Bearer wrong-key"),), (("authorization", "key-alpha"),)]
)
async def test_missing_or_wrong_key_is_unauthenticated(channel, metadata) -> None:
    gen = generations_pb2_grpc.GenerationsStub(channel)
    models = models_pb2_grpc.ModelsStub(channel)
    await expect_error(
        lambda: gen.Generate(good(), metadata=metadata), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"
    )
    await expect_error(
        lambda: models.ListModels(models_pb2.ListModelsRequest(), metadata=metadata),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
    )


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (good(max_output_tokens=0), "INVALID_MAX_OUTPUT_TOKENS"),
        (good(model="no-such-model"), "UNKNOWN_MODEL"),
        (good(model="smollm2-135m@0000000000000000"), "UNKNOWN_MODEL"),
        (good(prompt="hello " * 8200), "CONTEXT_LENGTH_EXCEEDED"),
        (good(max_output_tokens=8192), "CONTEXT_LENGTH_EXCEEDED"),
        (good(sampling=pb.SamplingParams(temperature=3.0)), "INVALID_SAMPLING"),
        (good(sampling=pb.SamplingParams(top_p=0.0)), "INVALID_SAMPLING"),
        (good(sampling=pb.SamplingParams(top_k=100_000)), "INVALID_SAMPLING"),
        (good(sampling=pb.SamplingParams(stop=[""])), "INVALID_SAMPLING"),
        (good(prompt=""), "EMPTY_INPUT"),
        (good(tier=9), "INVALID_TIER"),
    ],
)
async def test_invalid_requests_are_invalid_argument(
    channel, request_: pb.GenerateRequest, reason: str
) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    await expect_error(
        lambda: stub.Generate(request_, metadata=auth()), grpc.StatusCode.INVALID_ARGUMENT, reason
    )


async def test_bad_chat_role_is_invalid_argument(channel) -> None:
    req = pb.GenerateRequest(model="smollm2-135m", max_output_tokens=4)
    req.messages.messages.add(role="wizard", content="hi")
    stub = generations_pb2_grpc.GenerationsStub(channel)
    await expect_error(
        lambda: stub.Generate(req, metadata=auth()), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_MESSAGE"
    )


async def test_unknown_generations_are_not_found(channel) -> None:
    stub = generations_pb2_grpc.GenerationsStub(channel)
    nf, reason = grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND"
    await expect_error(
        lambda: stub.GetGeneration(pb.GetGenerationRequest(generation_id="g"), metadata=auth()), nf, reason
    )
    await expect_error(
        lambda: stub.GetGeneration(pb.GetGenerationRequest(request_id="r"), metadata=auth()), nf, reason
    )
    await expect_error(
        lambda: stub.CancelGeneration(pb.CancelGenerationRequest(generation_id="g"), metadata=auth()),
        nf,
        reason,
    )
    await expect_error(lambda: stub.Resume(pb.ResumeRequest(generation_id="g"), metadata=auth()), nf, reason)
    await expect_error(
        lambda: stub.GetGeneration(pb.GetGenerationRequest(), metadata=auth()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "MISSING_KEY",
    )

    async def frames():
        yield pb.ConverseRequest(cancel="g")

    # on Converse the refused frame is an event and the stream ends OK; without a key, the stream fails
    events = [e async for e in stub.Converse(frames(), metadata=auth())]
    assert [(e.generation_id, e.rejected.status.code) for e in events] == [
        ("g", grpc.StatusCode.NOT_FOUND.value[0])
    ]
    info = error_info(events[0].rejected.status)
    assert info is not None and info.reason == reason
    await expect_error(lambda: stub.Converse(frames()), grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")


async def test_list_models_reports_the_ready_pinned_version(channel, platform) -> None:
    resp = await models_pb2_grpc.ModelsStub(channel).ListModels(
        models_pb2.ListModelsRequest(), metadata=auth()
    )
    version = platform.registry.resolve("smollm2-135m")
    assert [v.id for v in resp.versions] == [version.version_id]
    v = resp.versions[0]
    assert v.ready and v.ready_workers == 1 and v.context_length == 8192
    assert v.weights_sha256 == version.manifest.files["model.safetensors"]
    assert v.compatibility_key == version.manifest.compatibility_key
    assert [(a.alias, [t.version_id for t in a.targets]) for a in resp.aliases] == [
        ("smollm2-135m", [version.version_id])
    ]


async def test_health_is_serving_without_credentials(channel) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    for service in ("", "llm.v1.Generations"):
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=service))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    watch = stub.Watch(health_pb2.HealthCheckRequest(service=""))  # passes the error interceptor too
    first = await watch.read()
    watch.cancel()
    assert first.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_the_public_services(channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)

    async def ask():
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    responses = [r async for r in stub.ServerReflectionInfo(ask())]
    names = {s.name for s in responses[0].list_services_response.service}
    assert {"llm.v1.Generations", "llm.v1.Models", "grpc.health.v1.Health"} <= names
