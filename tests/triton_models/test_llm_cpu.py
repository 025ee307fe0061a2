"""The CPU model's model.py is a shim: imported as Triton's stub imports it (a fake
`triton_python_backend_utils`, the file loaded by path), it starts the worker for the deployment its
config names, hands each request over and closes the worker at unload."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as mc

from tests.worker import fake_pb_utils as pb
from worker.deployment import ModelDeployment, materialize_repository
from worker.triton_binding import TritonMetrics, TritonRequest

SHIM = Path(__file__).resolve().parents[2] / "triton_models" / "llm_cpu" / "1" / "model.py"


@pytest.fixture()
def shim() -> Iterator[ModuleType]:
    saved = sys.modules.get("triton_python_backend_utils")
    sys.modules["triton_python_backend_utils"] = pb
    try:
        spec = importlib.util.spec_from_file_location("llm_cpu_model", SHIM)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        if saved is None:
            sys.modules.pop("triton_python_backend_utils", None)
        else:
            sys.modules["triton_python_backend_utils"] = saved


class Worker:
    def __init__(self) -> None:
        self.submitted: list[Any] = []
        self.closed = False

    def submit(self, request: Any) -> None:
        self.submitted.append(request)

    def close(self) -> None:
        self.closed = True


class RawRequest:
    def __init__(self) -> None:
        self.inputs = {"input_ids": pb.Tensor("input_ids", np.asarray([[1, 2]], dtype=np.int32))}

    def get_response_sender(self) -> object:
        return object()


def test_the_shim_starts_the_configured_worker_and_delegates(
    shim: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployment = ModelDeployment("m", Path("/artifact"), "v1", kv_cache_blocks=600, intra_op_threads=2)
    materialize_repository([deployment], tmp_path)
    config = text_format.Parse((tmp_path / "m" / "config.pbtxt").read_text(), mc.ModelConfig())
    started: list[tuple[ModelDeployment, Any, Any]] = []
    worker = Worker()

    def start_worker(d: ModelDeployment, metrics: Any, log: Any) -> Worker:
        started.append((d, metrics, log))
        return worker

    monkeypatch.setattr(shim, "start_worker", start_worker)
    model = shim.TritonPythonModel()
    as_triton_sends_it = json_format.MessageToJson(config, preserving_proto_field_name=True)
    model.initialize({"model_name": "m", "model_config": as_triton_sends_it})
    [(d, metrics, log)] = started
    assert d == deployment and isinstance(metrics, TritonMetrics) and log is pb.Logger
    assert model.execute([RawRequest(), RawRequest()]) is None
    assert [type(r) for r in worker.submitted] == [TritonRequest, TritonRequest]
    assert [r.input("input_ids").tolist() for r in worker.submitted] == [[1, 2], [1, 2]]
    model.finalize()
    assert worker.closed
