"""Triton's Python-backend API (a fake of `triton_python_backend_utils`) as the worker's protocol:
inputs flattened, responses with their tensors or error, the FINAL flag, metric kinds."""

from __future__ import annotations

import json

import numpy as np

from tests.worker import fake_pb_utils as pb
from worker.protocol import ErrorResponse
from worker.triton_binding import TritonMetrics, TritonRequest

FINAL = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class RawSender:
    def __init__(self) -> None:
        self.sent: list[tuple[pb.InferenceResponse | None, int]] = []

    def send(self, response: pb.InferenceResponse | None = None, flags: int = 0) -> None:
        self.sent.append((response, flags))


class RawRequest:
    def __init__(self) -> None:
        self.inputs = {"input_ids": pb.Tensor("input_ids", np.asarray([[5, 6, 7]], dtype=np.int32))}
        self.sender = RawSender()
        self.senders_asked = 0
        self.params: str | Exception = "{}"  # the request's parameters, as the stub gives them: JSON

    def parameters(self) -> str:
        if isinstance(self.params, Exception):
            raise self.params
        return self.params

    def request_id(self) -> str:
        return "g1"

    def is_cancelled(self) -> bool:
        return True

    def get_response_sender(self) -> RawSender:
        self.senders_asked += 1
        return self.sender


def test_a_request_reads_inputs_flattened_and_none_when_absent() -> None:
    raw = RawRequest()
    request = TritonRequest(pb, raw)
    values = request.input("input_ids")
    assert values is not None and values.tolist() == [5, 6, 7]
    assert request.input("tier") is None
    assert (request.request_id(), request.is_cancelled()) == ("g1", True)


def test_the_sender_is_asked_for_once_and_sends_tensors_errors_and_flags() -> None:
    raw = RawRequest()
    request = TritonRequest(pb, raw)
    request.sender.send({"output_ids": np.asarray([[[101]]], dtype=np.int32)}, final=False)
    request.sender.send(ErrorResponse("capacity: full"), final=True)
    request.sender.send(None, final=True)
    assert raw.senders_asked == 1
    (tensors, f1), (error, f2), (bare, f3) = raw.sender.sent
    assert tensors is not None and tensors.tensors() == {"output_ids": [101]} and f1 == 0
    assert error is not None and error.error is not None and error.error.message() == "capacity: full"
    assert f2 == FINAL
    assert bare is None and f3 == FINAL


def test_metric_families_get_tritons_kinds() -> None:
    metrics = TritonMetrics(pb)
    counter = metrics.family("c_total", "a counter", counter=True)
    gauge = metrics.family("g", "a gauge", counter=False)
    assert isinstance(counter, pb.MetricFamily) and counter.kind == pb.MetricFamily.COUNTER
    assert isinstance(gauge, pb.MetricFamily) and gauge.kind == pb.MetricFamily.GAUGE


def test_a_request_reads_the_traceparent_its_parameters_carry() -> None:
    raw = RawRequest()
    request = TritonRequest(pb, raw)
    assert request.traceparent() == ""
    raw.params = json.dumps(
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "x": 1}
    )
    assert request.traceparent() == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    for odd in ("not json", "[1, 2]", json.dumps({"traceparent": 7}), "", RuntimeError("stub")):
        raw.params = odd
        assert request.traceparent() == "", odd  # a span is never worth failing the request
