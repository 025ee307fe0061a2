"""The worker client reads each streamed response's tokens and counts, and asks only for them."""

from __future__ import annotations

import numpy as np
import pytest
from tritonclient.grpc import InferResult
from tritonclient.grpc import service_pb2 as triton_pb

from frontend.worker import (
    REQUESTED,
    REQUESTED_EXTENSIONS,
    TritonWorker,
    WorkerChunk,
    WorkerError,
    parse_response,
)


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
    assert REQUESTED == ("output_ids",)
    assert TritonWorker("127.0.0.1:1")._outputs == ("output_ids", *REQUESTED_EXTENSIONS)
    assert TritonWorker("127.0.0.1:1", extensions=False)._outputs == ("output_ids",)
