"""Fakes of what the worker adapter talks to: requests and their senders (worker/protocol.py),
a scripted engine, Triton's metrics API, a log and a clock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.engine import CapacityError, EngineRequest, FinishReason, Stats, StepOutput
from worker.adapter import COALESCE_FROM, WorkerAdapter
from worker.protocol import ErrorResponse, Response
from worker.request_spans import RequestSpans
from worker.worker_metrics import WorkerMetrics

# what a request was sent, in order: tensors as lists, an error as its message, None for a bare
# FINAL; each with its final flag
Sent = tuple[dict[str, list[int]] | str | None, bool]


class Sender:
    """Records what it is sent; raises the next of `failures` instead while there are any."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.failures: list[Exception] = []

    def send(self, response: Response, final: bool) -> None:
        if self.failures:
            raise self.failures.pop(0)
        if response is None:
            self.sent.append((None, final))
        elif isinstance(response, ErrorResponse):
            self.sent.append((response.message, final))
        else:
            self.sent.append(({k: v.reshape(-1).tolist() for k, v in response.items()}, final))


class Request:
    """A request whose tensors are given as lists; cancelled when the test says so."""

    def __init__(self, rid: str, streaming: bool = True, prompt: tuple[int, ...] | None = (5, 6, 7),
                 out: int = 3, **inputs: list[object]) -> None:  # fmt: skip
        self.inputs: dict[str, np.ndarray] = {
            "request_output_len": np.asarray([out], dtype=np.int32),
            "streaming": np.asarray([streaming], dtype=bool),
        }
        if prompt is not None:
            self.inputs["input_ids"] = np.asarray(prompt, dtype=np.int32)
        for name, values in inputs.items():
            self.inputs[name] = np.asarray(values)
        self.rid = rid
        self.cancelled = False
        self.checks = 0
        self.fail_check: Exception | None = None  # is_cancelled() raises it
        self.trace = ""  # the W3C trace context its parameters carry
        self._sender = Sender()

    def input(self, name: str) -> np.ndarray | None:
        return self.inputs.get(name)

    def request_id(self) -> str:
        return self.rid

    def traceparent(self) -> str:
        return self.trace

    def is_cancelled(self) -> bool:
        self.checks += 1
        if self.fail_check is not None:
            raise self.fail_check
        return self.cancelled

    @property
    def sender(self) -> Sender:
        return self._sender

    @property
    def sent(self) -> list[Sent]:
        return self._sender.sent


SCHEDULE_S = 0.125


class ScriptedEngine:
    """One token per running request per step (101, 102, ...) until its max_output_tokens; every
    prompt token but the first counts as cached. `fail_step` / `fail_add` raise from step() /
    add_request(); `full` refuses new requests for capacity; `fail_request` ends the named running
    requests at the next step with FinishReason.ERROR and the given error."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[EngineRequest, int]] = {}
        self.aborted: list[tuple[EngineRequest, int]] = []
        self.admitted: list[EngineRequest] = []
        self.last_batch_tokens = 0
        self.fail_step: Exception | None = None
        self.fail_add: Exception | None = None
        self.full = False
        self.fail_request: dict[str, str] = {}
        self.schedule_s = 0.0  # each step says it spent SCHEDULE_S of its time in the scheduler

    def add_request(self, request: EngineRequest) -> StepOutput:
        if self.fail_add is not None:
            raise self.fail_add
        if self.full:
            raise CapacityError("needs 1 blocks, 0 free")
        self.admitted.append(request)
        self.running[request.request_id] = (request, 0)
        return StepOutput(request.request_id, (), len(request.prompt_ids), 1, 0, None)

    def abort(self, request_id: str) -> None:
        if request_id in self.running:  # unknown ids are ignored, as the engine does
            self.aborted.append(self.running.pop(request_id))

    def has_unfinished(self) -> bool:
        return bool(self.running or self.aborted)

    def step(self) -> list[StepOutput]:
        if self.fail_step is not None:
            raise self.fail_step
        self.schedule_s += SCHEDULE_S
        aborted = FinishReason.ABORTED
        outs = [StepOutput(r.request_id, (), len(r.prompt_ids), 1, n, aborted) for r, n in self.aborted]
        self.aborted.clear()
        for rid, (r, n) in list(self.running.items()):
            if rid in self.fail_request:
                error = self.fail_request.pop(rid)
                outs.append(StepOutput(rid, (), len(r.prompt_ids), 1, n, FinishReason.ERROR, error))
                del self.running[rid]
                continue
            done = n + 1 == r.max_output_tokens
            reason = FinishReason.LENGTH if done else None
            outs.append(StepOutput(rid, (101 + n,), len(r.prompt_ids), 1, n + 1, reason))
            self.running[rid] = (r, n + 1)
            if done:
                del self.running[rid]
        self.last_batch_tokens = len(outs)
        return outs

    def stats(self) -> Stats:
        running, batch = len(self.running), self.last_batch_tokens
        looked_up = sum(len(r.prompt_ids) for r in self.admitted)  # every prompt token, as the engine counts
        return Stats(0, 0, 0, running=running, waiting=0, preemptions=0, prefix_query_tokens=looked_up,
                     prefix_hit_tokens=0, last_batch_tokens=batch)  # fmt: skip

    def prefix_keys(self, limit: int) -> list[bytes]:
        """One key per admitted request (its id, padded), most recent first."""
        return [r.request_id.encode().ljust(32, b"-") for r in reversed(self.admitted)][:limit]


class Metric:
    def __init__(self, labels: Mapping[str, str]) -> None:
        self.labels = dict(labels)
        self.value = 0.0

    def set(self, value: float) -> None:
        self.value = value

    def increment(self, value: float) -> None:
        self.value += value


@dataclass(slots=True)
class Family:
    name: str
    counter: bool
    metrics: list[Metric] = field(default_factory=list)

    def Metric(self, labels: dict[str, str]) -> Metric:
        metric = Metric(labels)
        self.metrics.append(metric)
        return metric


class MetricsApi:
    def family(self, name: str, description: str, counter: bool) -> Family:
        return Family(name, counter)


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log_info(self, message: str) -> None:
        self.lines.append(message)

    def log_error(self, message: str) -> None:
        self.lines.append(message)


class Clock:
    """Advances by `tick` seconds on every reading."""

    def __init__(self, tick: float = 0.25) -> None:
        self.now = 0.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def turn(adapter: WorkerAdapter, turns: int = 1) -> None:
    """Turns the loop, each turn then waiting until the outbox has made every call posted (its
    thread runs them while the next step would run: outbox.py)."""
    for _ in range(turns):
        adapter.run_once()
        adapter.outbox.flush()


def make_adapter(
    engine: ScriptedEngine | None = None,
    clock: Clock | None = None,
    coalesce_from: int = COALESCE_FROM,
    spans: RequestSpans | None = None,
    new_engine: Callable[[], ScriptedEngine] = ScriptedEngine,
) -> WorkerAdapter:
    """An adapter over a scripted engine, as the loader leaves it but with no loop thread: tests turn
    the loop with turn(). new_engine: what it builds after a failed step."""
    return WorkerAdapter(
        engine or ScriptedEngine(),
        new_engine,
        frozenset({2}),
        WorkerMetrics("m", MetricsApi()),
        Log(),
        clock=clock or Clock(),
        coalesce_from=coalesce_from,
        spans=spans,
    )
