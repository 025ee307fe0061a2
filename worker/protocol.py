"""The little of Triton's Python-backend API the worker uses, as protocols: the shim binds them to
Triton (triton_binding.py), tests to fakes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy.typing as npt

from engine.engine import EngineRequest, Stats, StepOutput

Array = npt.NDArray[Any]
Outputs = Mapping[str, Array]  # output tensor name -> its values, in the order sent


@dataclass(slots=True, frozen=True)
class ErrorResponse:
    """A response that ends a request with an error (a contracts.worker refusal message)."""

    message: str


Response = Outputs | ErrorResponse | None  # None: no data, only the flag (a bare FINAL)


class Sender(Protocol):
    """One request's response sender. `final` marks the request's last response: Triton releases
    the request only after it, so every request gets exactly one."""

    def send(self, response: Response, final: bool) -> None: ...


class Request(Protocol):
    def input(self, name: str) -> Array | None:
        """The named input tensor's values, flattened; None when the request does not carry it."""
        ...

    def request_id(self) -> str: ...

    def traceparent(self) -> str:
        """The W3C trace context the request's parameters carry (worker/request_spans.py);
        "" when they carry none."""
        ...

    def is_cancelled(self) -> bool:
        """True once the client cancelled (a round trip to tritonserver: ask once per step)."""
        ...

    @property
    def sender(self) -> Sender: ...


class Log(Protocol):
    def log_info(self, message: str) -> None: ...

    def log_error(self, message: str) -> None: ...


class StepEngine(Protocol):
    """What the adapter uses of engine.engine.Engine."""

    schedule_s: float  # cumulative seconds of its steps spent in the scheduler

    @property
    def last_batch_tokens(self) -> int: ...

    def add_request(self, request: EngineRequest) -> StepOutput: ...

    def abort(self, request_id: str) -> None: ...

    def has_unfinished(self) -> bool: ...

    def step(self) -> list[StepOutput]: ...

    def stats(self) -> Stats: ...

    def prefix_keys(self, limit: int) -> list[bytes]: ...
