"""The CPU worker and the TensorRT-LLM worker declare one tensor interface, the one contracts/worker.py
names, and the frontend sends each of them only tensors it declares, with the declared types and
shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from contracts import worker as wire
from frontend.dispatch.worker_client import WorkerRequest, build_inputs
from prebuild.trtllm import EngineBuild, render_config
from worker.deployment import ModelDeployment, materialize_repository

CPU_EXTENSION_INPUTS = set(wire.EXTENSION_INPUTS)
WIRE_TYPES = {"INT32": "TYPE_INT32", "INT64": "TYPE_INT64", "UINT64": "TYPE_UINT64", "FP32": "TYPE_FP32",
              "BOOL": "TYPE_BOOL", "BYTES": "TYPE_STRING"}  # fmt: skip


def parse(text: str) -> mc.ModelConfig:
    return text_format.Parse(text, mc.ModelConfig())


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> mc.ModelConfig:
    repo = tmp_path_factory.mktemp("repo")
    materialize_repository([ModelDeployment("m", Path("/artifact"), "v1")], repo)
    return parse((repo / "m" / "config.pbtxt").read_text())


@pytest.fixture(scope="module")
def trt() -> mc.ModelConfig:
    return parse(render_config(EngineBuild(Path("/artifact"), Path("/work")), "m"))


def signature(tensors) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {t.name: (mc.DataType.Name(t.data_type), tuple(t.dims)) for t in tensors}


def test_every_tensorrt_llm_tensor_is_declared_identically_by_the_cpu_model(cpu, trt) -> None:
    cpu_in, trt_in = signature(cpu.input), signature(trt.input)
    assert {name: cpu_in.get(name) for name in trt_in} == trt_in
    cpu_out, trt_out = signature(cpu.output), signature(trt.output)
    assert {name: cpu_out.get(name) for name in trt_out} == trt_out
    assert set(trt_in) == set(wire.TRTLLM_INPUTS)
    required = {t.name for t in trt.input if not t.optional}
    assert required == {t.name for t in cpu.input if not t.optional} == {
        wire.INPUT_IDS, wire.INPUT_LENGTHS, wire.REQUEST_OUTPUT_LEN
    }  # fmt: skip


def test_cpu_extensions_are_optional_inputs_and_extra_outputs_only(cpu, trt) -> None:
    extra_in = {t.name: t for t in cpu.input if t.name not in {u.name for u in trt.input}}
    assert set(extra_in) == CPU_EXTENSION_INPUTS
    assert all(t.optional for t in extra_in.values())
    assert {t.name for t in cpu.output} - {t.name for t in trt.output} == set(wire.EXTENSION_OUTPUTS)
    assert set(wire.TRTLLM_OUTPUTS) == {t.name for t in trt.output}


def test_both_are_decoupled_with_a_batch_dimension(cpu, trt) -> None:
    assert cpu.model_transaction_policy.decoupled and trt.model_transaction_policy.decoupled
    assert cpu.max_batch_size > 0 and trt.max_batch_size > 0
    assert trt.backend == "tensorrtllm" and cpu.backend == "python"
    params = {k: v.string_value for k, v in trt.parameters.items()}
    assert params["gpt_model_type"] == "inflight_fused_batching"
    assert params["enable_kv_cache_reuse"] == params["enable_chunked_context"] == "true"
    assert params["batch_scheduler_policy"] == "guaranteed_no_evict"


@pytest.mark.parametrize("extensions", [False, True])
def test_frontend_sends_only_declared_tensors_with_declared_types(cpu, trt, extensions: bool) -> None:
    declared = signature((cpu if extensions else trt).input)
    req = WorkerRequest("m", (1, 2, 3), 8, end_id=2, temperature=0.7, top_k=5, top_p=0.9, seed=7)
    sent = build_inputs(req, extensions)
    assert {t.name() for t in sent} <= set(declared)
    for tensor in sent:
        dtype, dims = declared[tensor.name()]
        assert WIRE_TYPES[tensor.datatype()] == dtype, tensor.name()
        shape = tensor.shape()
        assert shape[0] == 1 and len(shape) == 1 + len(dims), tensor.name()  # batch of one
    names = {t.name() for t in sent}
    assert (names & CPU_EXTENSION_INPUTS == set()) is (not extensions)
