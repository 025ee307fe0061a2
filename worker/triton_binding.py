"""Triton's Python-backend API as the worker's protocol (protocol.py).

`triton_python_backend_utils` exists only inside Triton's stub process, so the shim
(triton_models/llm_cpu/1/model.py) passes the module in; tests pass a fake of it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from worker.protocol import Array, ErrorResponse, Response
from worker.worker_metrics import MetricFamily


class TritonSender:
    def __init__(self, pb_utils: Any, sender: Any) -> None:
        self._pb = pb_utils
        self._sender = sender

    def send(self, response: Response, final: bool) -> None:
        flags = self._pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        if response is None:
            self._sender.send(flags=flags)
        elif isinstance(response, ErrorResponse):
            error = self._pb.TritonError(response.message)
            self._sender.send(self._pb.InferenceResponse(error=error), flags=flags)
        else:
            tensors = [self._pb.Tensor(name, values) for name, values in response.items()]
            self._sender.send(self._pb.InferenceResponse(output_tensors=tensors), flags=flags)


class TritonRequest:
    """One Triton request; holds it and its sender until the adapter lets go after FINAL."""

    def __init__(self, pb_utils: Any, request: Any) -> None:
        self._pb = pb_utils
        self._request = request
        self._sender = TritonSender(pb_utils, request.get_response_sender())

    def input(self, name: str) -> Array | None:
        tensor = self._pb.get_input_tensor_by_name(self._request, name)
        return None if tensor is None else np.asarray(tensor.as_numpy()).reshape(-1)

    def request_id(self) -> str:
        return str(self._request.request_id())

    def traceparent(self) -> str:
        try:
            value = json.loads(self._request.parameters() or "{}").get("traceparent", "")
        except Exception:  # not JSON, not an object, or the stub failed: never worth the request
            return ""
        return value if isinstance(value, str) else ""

    def is_cancelled(self) -> bool:
        return bool(self._request.is_cancelled())

    @property
    def sender(self) -> TritonSender:
        return self._sender


class TritonMetrics:
    """Metric families through Triton's custom metrics API."""

    def __init__(self, pb_utils: Any) -> None:
        self._pb = pb_utils

    def family(self, name: str, description: str, counter: bool) -> MetricFamily:
        kinds = self._pb.MetricFamily
        family: MetricFamily = kinds(name, description, kinds.COUNTER if counter else kinds.GAUGE)
        return family
