"""The CPU worker's Triton model (triton_models/llm_cpu/1/), run against a fake Triton API and a
scripted engine: what each response carries, the FINAL flag, cancellation checks, unloading, the
loop's metrics and the one thread that runs torch."""

from __future__ import annotations

import importlib.util
import queue
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from contracts.tier import Tier
from engine.engine import CapacityError, EngineError, EngineRequest, FinishReason, SamplingParams, StepOutput
from tests.triton_models import fake_pb_utils as pb

TEMPLATE = Path(__file__).resolve().parents[2] / "triton_models" / "llm_cpu" / "1"
SIBLINGS = ("triton_python_backend_utils", "torch_thread", "worker_metrics")


@pytest.fixture(scope="module")
def cpu_model() -> Iterator[ModuleType]:
    """model.py imported as the stub imports it: its folder on sys.path, pb_utils faked."""
    saved = {name: sys.modules.get(name) for name in SIBLINGS}
    sys.modules["triton_python_backend_utils"] = pb
    sys.path.insert(0, str(TEMPLATE))
    try:
        spec = importlib.util.spec_from_file_location("llm_cpu_model", TEMPLATE / "model.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(TEMPLATE))
        for name, was in saved.items():
            if was is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = was


class ScriptedEngine:
    """One token per running request per step (101, 102, ...) until its max_output_tokens."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[EngineRequest, int]] = {}
        self.aborted: list[tuple[EngineRequest, int]] = []
        self.last_batch_tokens = 0

    def add_request(self, request: EngineRequest) -> StepOutput:
        self.running[request.request_id] = (request, 0)
        return StepOutput(request.request_id, (), len(request.prompt_ids), 1, 0, None)

    def abort(self, request_id: str) -> None:
        self.aborted.append(self.running.pop(request_id))

    def has_unfinished(self) -> bool:
        return bool(self.running or self.aborted)

    def step(self) -> list[StepOutput]:
        aborted = FinishReason.ABORTED
        outs = [StepOutput(r.request_id, (), len(r.prompt_ids), 1, n, aborted) for r, n in self.aborted]
        self.aborted.clear()
        for rid, (r, n) in list(self.running.items()):
            done = n + 1 == r.max_output_tokens
            reason = FinishReason.LENGTH if done else None
            outs.append(StepOutput(rid, (101 + n,), len(r.prompt_ids), 1, n + 1, reason))
            self.running[rid] = (r, n + 1)
            if done:
                del self.running[rid]
        self.last_batch_tokens = len(outs)
        return outs


class Sender:
    def __init__(self) -> None:
        self.sent: list[tuple[pb.InferenceResponse | None, int]] = []

    def send(self, response: pb.InferenceResponse | None = None, flags: int = 0) -> None:
        self.sent.append((response, flags))

    def responses(self) -> list[tuple[dict[str, list[int]] | str | None, int]]:
        """(tensors, flags) per response; an error as its message; None for a bare FINAL flag."""
        out: list[tuple[dict[str, list[int]] | str | None, int]] = []
        for r, flags in self.sent:
            if r is None:
                out.append((None, flags))
            elif r.error is not None:
                out.append((r.error.message(), flags))
            else:
                out.append((r.tensors(), flags))
        return out


class Request:
    def __init__(self, rid: str, streaming: bool = True, prompt: tuple[int, ...] = (5, 6, 7), out: int = 3):
        def tensor(name: str, values: Any, dtype: Any) -> pb.Tensor:
            return pb.Tensor(name, np.asarray([values], dtype=dtype))

        self.inputs = {
            "input_ids": tensor("input_ids", list(prompt), np.int32),
            "request_output_len": tensor("request_output_len", [out], np.int32),
            "streaming": tensor("streaming", [streaming], bool),
        }
        self.rid = rid
        self.sender = Sender()
        self.cancelled = False
        self.checks = 0

    def request_id(self) -> str:
        return self.rid

    def get_response_sender(self) -> Sender:
        return self.sender

    def is_cancelled(self) -> bool:
        self.checks += 1
        return self.cancelled


def make_model(module: ModuleType) -> Any:
    """The model as initialize() leaves it, with the scripted engine and no torch thread."""
    m = module.TritonPythonModel()
    m._types = (CapacityError, EngineError, EngineRequest, FinishReason, SamplingParams)
    m._tier = Tier
    m.logger = pb.Logger
    m.engine = ScriptedEngine()
    m.eos_ids = frozenset({2})
    m.metrics = module.WorkerMetrics("m")
    m.incoming = queue.Queue()
    m.live = {}
    return m


FINAL = pb.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def test_a_streamed_request_gets_its_counts_once_then_only_each_steps_tokens(cpu_model: ModuleType) -> None:
    m, req = make_model(cpu_model), Request("g1")
    m._admit(req)
    for _ in range(3):
        m._step()
    assert req.sender.responses() == [
        ({"output_ids": [], "num_input_tokens": [3], "num_cached_tokens": [1]}, 0),
        ({"output_ids": [101]}, 0),
        ({"output_ids": [102]}, 0),
        ({"output_ids": [103]}, FINAL),
    ]
    assert m.live == {} and not m.engine.has_unfinished()


def test_a_non_streaming_request_gets_one_response_with_every_token_and_count(cpu_model: ModuleType) -> None:
    m, req = make_model(cpu_model), Request("g1", streaming=False)
    m._admit(req)
    for _ in range(3):
        m._step()
    assert req.sender.responses() == [
        (
            {
                "output_ids": [101, 102, 103],
                "sequence_length": [3],
                "num_input_tokens": [3],
                "num_cached_tokens": [1],
                "num_output_tokens": [3],
            },
            FINAL,
        )
    ]


def test_cancellation_is_checked_once_per_live_request_per_step(cpu_model: ModuleType) -> None:
    m = make_model(cpu_model)
    a, b = Request("a", out=5), Request("b", out=5)
    m._admit(a)
    m._admit(b)
    m._step()
    a.cancelled = True
    m._step()  # a is aborted before this step runs; its FINAL comes with the step's outputs
    m._step()
    assert (a.checks, b.checks) == (2, 3)
    assert a.sender.responses() == [
        ({"output_ids": [], "num_input_tokens": [3], "num_cached_tokens": [1]}, 0),
        ({"output_ids": [101]}, 0),
        (None, FINAL),
    ]
    assert [r for r, _ in b.sender.responses()][1:] == [{"output_ids": [101 + n]} for n in range(3)]
    assert set(m.live) == {"b"}


def test_the_loop_reports_its_steps_and_where_their_time_went(cpu_model: ModuleType) -> None:
    m = make_model(cpu_model)
    m._admit(Request("g1", out=2))
    m._step()
    m._step()

    class Stats:
        blocks_used = blocks_free = blocks_cached = running = waiting = 0
        preemptions = prefix_query_tokens = prefix_hit_tokens = last_batch_tokens = 0

    m.metrics.publish(lambda: Stats(), force=True)
    loop = {f.name: f for f in m.metrics.families}["llm_worker_loop_seconds_total"]
    assert loop.kind == pb.MetricFamily.COUNTER
    assert [metric.labels for metric in loop.metrics] == [
        {"model": "m", "part": part} for part in ("cancel_check", "model", "respond")
    ]
    assert all(metric.value >= 0 for metric in loop.metrics)
    assert m.metrics.counters["steps"].value == 2


def test_unloading_fails_live_requests_after_what_was_queued_for_them(cpu_model: ModuleType) -> None:
    m, req = make_model(cpu_model), Request("g1")
    m._admit(req)
    m._step()
    finished = threading.Thread(target=lambda: None)
    finished.start()
    m.torch, m.stopping = SimpleNamespace(thread=finished), threading.Event()
    m.finalize()
    assert req.sender.responses() == [
        ({"output_ids": [], "num_input_tokens": [3], "num_cached_tokens": [1]}, 0),
        ({"output_ids": [101]}, 0),
        ("model is unloading", FINAL),
    ]


def test_the_torch_thread_runs_every_call_and_then_the_loop(cpu_model: ModuleType) -> None:
    torch_thread = sys.modules["torch_thread"]
    threads = torch.get_num_threads()  # unchanged: torch's thread count is process-wide
    t = torch_thread.TorchThread(threads)
    seen = [t.call(threading.current_thread), t.call(threading.current_thread)]
    assert seen[0] is seen[1] is t.thread and seen[0] is not threading.current_thread()
    assert t.call(torch.get_num_threads) == threads
    with pytest.raises(ValueError, match="no weights"):
        t.call(lambda: (_ for _ in ()).throw(ValueError("no weights")))
    ran = threading.Event()
    t.run(lambda: ran.set())
    t.thread.join(timeout=5)
    assert ran.is_set() and not t.thread.is_alive()
