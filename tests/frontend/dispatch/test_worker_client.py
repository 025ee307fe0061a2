"""The worker client reads each streamed response's tokens and counts, asks only for them, and
loses a stream whose model has been silent for its inactivity timeout."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace

import numpy as np
import pytest
from tritonclient.grpc import InferResult
from tritonclient.grpc import service_pb2 as triton_pb
from tritonclient.utils import InferenceServerException

from frontend.dispatch.worker_client import (
    REQUESTED,
    REQUESTED_EXTENSIONS,
    TritonWorker,
    WorkerCapacityError,
    WorkerChunk,
    WorkerDown,
    WorkerError,
    WorkerLost,
    WorkerRequest,
    is_worker_down,
    parse_response,
)
from frontend.dispatch.worker_liveness import Liveness


def raw_response(**outputs: list[int]) -> InferResult:
    """A response as Triton's gRPC frontend sends it: INT32 values in raw_output_contents."""
    response = triton_pb.ModelInferResponse()
    for name, values in outputs.items():
        out = response.outputs.add(name=name, datatype="INT32")
        out.shape.extend([1, 1, len(values)] if name == "output_ids" else [1, 1])
        response.raw_output_contents.append(np.asarray(values, dtype=np.int32).tobytes())
    return InferResult(response)


def test_a_step_response_is_its_new_tokens() -> None:
    assert parse_response(raw_response(output_ids=[5, 49151, 7])) == WorkerChunk([5, 49151, 7])


def test_the_admission_response_carries_the_prompt_counts_and_no_tokens() -> None:
    chunk = parse_response(raw_response(output_ids=[], num_input_tokens=[130], num_cached_tokens=[112]))
    assert chunk == WorkerChunk([], num_input_tokens=130, num_cached_tokens=112)


def test_outputs_it_did_not_ask_for_are_ignored() -> None:
    # a TensorRT-LLM worker's sequence_length, or the cumulative count of a non-streaming response
    chunk = parse_response(raw_response(output_ids=[9], sequence_length=[1], num_output_tokens=[40]))
    assert chunk == WorkerChunk([9])


def test_a_response_without_raw_contents_is_a_worker_error() -> None:
    response = triton_pb.ModelInferResponse()
    response.outputs.add(name="output_ids", datatype="INT32").contents.int_contents.extend([5])
    with pytest.raises(WorkerError, match="malformed worker response"):
        parse_response(InferResult(response))


def test_only_the_tokens_and_our_workers_prompt_counts_are_requested() -> None:
    """Built on an event loop, as the frontend builds them (the aio client's channel needs one)."""

    async def outputs(extensions: bool) -> tuple[str, ...]:
        worker = TritonWorker("127.0.0.1:1", extensions=extensions)
        try:
            return worker._outputs
        finally:
            await worker.close()

    assert REQUESTED == ("output_ids",)
    assert asyncio.run(outputs(True)) == ("output_ids", *REQUESTED_EXTENSIONS)
    assert asyncio.run(outputs(False)) == ("output_ids",)


class FakeStream:
    """Triton's response stream: the given (result, error) pairs, then nothing ever again."""

    def __init__(self, *responses: tuple[InferResult | None, InferenceServerException | None]) -> None:
        self.responses = list(responses)
        self.cancelled = False

    async def __anext__(self) -> tuple[InferResult | None, InferenceServerException | None]:
        if self.responses:
            return self.responses.pop(0)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    def cancel(self) -> None:
        self.cancelled = True


def worker_over(stream: FakeStream, clock: Callable[[], float] = time.monotonic) -> TritonWorker:
    worker = TritonWorker("127.0.0.1:1", inactivity_timeout_s=0.05)
    worker._client = SimpleNamespace(stream_infer=lambda requests, headers: stream)
    worker.liveness["m"] = Liveness(clock)
    return worker


REQ = WorkerRequest(model="m", prompt_ids=(1,), max_output_tokens=1, end_id=None)


async def test_a_stream_whose_model_sends_nothing_is_lost_after_the_inactivity_timeout() -> None:
    stream = FakeStream()
    chunks = worker_over(stream).generate(REQ)
    with pytest.raises(WorkerLost, match=r"sent nothing for 0\.05s"):
        await asyncio.wait_for(anext(chunks), timeout=30)  # the bound is against a hang only
    assert stream.cancelled  # the Triton request is cancelled


async def test_responses_and_the_workers_refusals_are_signs_of_life_and_tritons_errors_are_not() -> None:
    now = [10.0]
    ack = raw_response(output_ids=[], num_input_tokens=[1], num_cached_tokens=[0])
    worker = worker_over(FakeStream((ack, None)), clock=lambda: now[0])
    now[0] = 11.0
    assert await anext(worker.generate(REQ)) == WorkerChunk([], 1, 0)
    assert worker.liveness["m"].last_seen == 11.0

    not_healthy = InferenceServerException(msg="Stub process 'm_0_0' is not healthy.")
    worker = worker_over(FakeStream((None, not_healthy)), clock=lambda: now[0])
    now[0] = 12.0
    with pytest.raises(WorkerDown, match="not healthy"):  # the worker is gone, not the request at fault
        await anext(worker.generate(REQ))
    assert worker.liveness["m"].last_seen == 11.0  # Triton answered, not the model

    full = InferenceServerException(msg="capacity: needs 3 blocks, 1 free")
    worker = worker_over(FakeStream((None, full)), clock=lambda: now[0])
    with pytest.raises(WorkerCapacityError):
        await anext(worker.generate(REQ))
    assert worker.liveness["m"].last_seen == 12.0  # the engine loop refused it


def test_tritons_own_errors_and_an_unloading_model_mean_the_worker_is_down() -> None:
    """Our CPU worker's own errors carry a reason (contracts/worker.py); anything else came from
    Triton, which answers for a model whose stub died or that is not loaded. A TensorRT-LLM
    worker's errors carry none, so there only Triton's phrases for those count."""
    stub = "Failed to process the request(s) for model 'm_0_0', message: Stub process 'm_0_0' is not healthy."
    unknown = "Request for unknown model: 'm' is not found"
    assert is_worker_down(stub, extensions=True) and is_worker_down(stub, extensions=False)
    assert is_worker_down(unknown, extensions=False)
    assert is_worker_down("model is unloading", extensions=True)
    assert is_worker_down("anything Triton says", extensions=True)
    assert not is_worker_down("invalid request: prompt too long", extensions=True)
    assert not is_worker_down("internal error: the engine failed", extensions=True)
    assert not is_worker_down("capacity: needs 3 blocks", extensions=True)
    assert not is_worker_down("[TensorRT-LLM][ERROR] input too long", extensions=False)


async def test_tritons_error_for_a_dead_stub_is_worker_down_not_a_worker_error() -> None:
    not_healthy = InferenceServerException(msg="Stub process 'm_0_0' is not healthy.")
    with pytest.raises(WorkerDown) as e:
        await anext(worker_over(FakeStream((None, not_healthy))).generate(REQ))
    assert isinstance(e.value, WorkerLost) and not isinstance(e.value, WorkerError)
    rejected = InferenceServerException(msg="invalid request: prompt too long")
    with pytest.raises(WorkerError, match="invalid request"):
        await anext(worker_over(FakeStream((None, rejected))).generate(REQ))


async def test_the_trace_context_goes_in_the_headers_and_in_the_request_itself() -> None:
    """Triton 2.51 sometimes leaves a stream's traceparent header unread; the CPU worker parents its
    engine span on the copy in the request's parameters (worker/request_spans.py)."""
    context = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    traced = dataclasses.replace(REQ, trace_headers=(("traceparent", context), ("tracestate", "a=1")))
    request, headers = await first_request(traced)
    assert request["parameters"] == {"traceparent": context}
    assert headers == {"traceparent": context, "tracestate": "a=1"}
    request, headers = await first_request(REQ)
    assert (request["parameters"], headers) == (None, None)
    request, headers = await first_request(traced, extensions=False)  # TensorRT-LLM: the header only
    assert (request["parameters"], headers) == (None, {"traceparent": context, "tracestate": "a=1"})


async def first_request(
    req: WorkerRequest, extensions: bool = True
) -> tuple[dict[str, object], dict[str, str] | None]:
    """What generate() hands Triton's client for `req`: its one request, and the stream's headers."""
    sent: list[tuple[dict[str, object], dict[str, str] | None]] = []
    ack = raw_response(output_ids=[], num_input_tokens=[1], num_cached_tokens=[0])
    stream = FakeStream((ack, None))

    def stream_infer(
        requests: AsyncIterator[dict[str, object]], headers: dict[str, str] | None
    ) -> FakeStream:
        async def first() -> None:
            sent.append((await anext(requests), headers))

        tasks.append(asyncio.get_running_loop().create_task(first()))
        return stream

    tasks: list[asyncio.Task[None]] = []
    worker = worker_over(stream)
    worker._client = SimpleNamespace(stream_infer=stream_infer)
    worker.extensions = extensions
    chunks = worker.generate(req)
    await anext(chunks)
    await asyncio.gather(*tasks)
    await chunks.aclose()
    ((request, headers),) = sent
    return request, headers
