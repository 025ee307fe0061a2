"""A stand-in for Triton's `triton_python_backend_utils` (it exists only inside the stub process):
tensors, responses, errors, the logger and custom metrics, recording what the model does."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


class Tensor:
    def __init__(self, name: str, array: np.ndarray) -> None:
        self._name, self._array = name, array

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array


class TritonError:
    def __init__(self, message: str) -> None:
        self._message = message

    def message(self) -> str:
        return self._message


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: TritonError | None = None) -> None:
        self.output_tensors = output_tensors or []
        self.error = error

    def tensors(self) -> dict[str, list[int]]:
        """name -> the tensor's values, flattened."""
        return {t.name(): t.as_numpy().reshape(-1).tolist() for t in self.output_tensors}


class Logger:
    lines: ClassVar[list[str]] = []

    @classmethod
    def log_info(cls, message: str) -> None:
        cls.lines.append(message)

    log_warn = log_error = log_info


class _Metric:
    def __init__(self, labels: dict[str, str]) -> None:
        self.labels = labels
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = value

    def increment(self, value: float) -> None:
        self.value += value


class MetricFamily:
    GAUGE, COUNTER = "gauge", "counter"

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name, self.kind = name, kind
        self.metrics: list[_Metric] = []

    def Metric(self, labels: dict[str, str]) -> _Metric:  # Triton's name
        metric = _Metric(labels)
        self.metrics.append(metric)
        return metric


def get_input_tensor_by_name(request: Any, name: str) -> Tensor | None:
    return request.inputs.get(name)
