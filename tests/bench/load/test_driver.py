"""The load driver: open and closed loop, what it records, and how failures are named."""

from __future__ import annotations

import asyncio
import itertools

from bench.load.driver import Job, TargetError, closed_loop, open_loop
from bench.load.metrics import Outcome
from bench.load.workload import RequestSpec


def job(index: int, output_tokens: int = 2) -> Job:
    return Job(RequestSpec(index, "interactive", 0, None, 4, output_tokens), "", (1, 2, 3, 4))


def ticking() -> itertools.count[float]:
    return itertools.count(100.0)


class Fake:
    """Delivers one token per step, or fails as told for some request indices."""

    name = "fake"

    def __init__(self, fail: dict[int, str] | None = None, short: set[int] | None = None) -> None:
        self.fail, self.short = fail or {}, short or set()
        self.in_flight = self.most_in_flight = 0
        self.order: list[int] = []

    async def generate(self, j: Job, out: Outcome) -> None:
        self.order.append(j.spec.index)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if j.spec.index in self.fail:
                if self.fail[j.spec.index] == "hang":
                    await asyncio.Event().wait()
                raise TargetError(self.fail[j.spec.index])
            for k in range(j.spec.output_tokens - (j.spec.index in self.short)):
                await asyncio.sleep(0)
                out.deliveries.append((float(k), 1))
        finally:
            self.in_flight -= 1


async def test_open_loop_times_each_request_from_its_scheduled_offset() -> None:
    clock = ticking()
    outs = await open_loop(Fake(), [job(0), job(1)], [0.0, 0.0], clock=lambda: next(clock))
    assert [(o.index, o.sent, o.error, o.output_tokens) for o in outs] == [
        (0, 100.0, None, 2),
        (1, 100.0, None, 2),
    ]
    assert all(o.end > 100.0 for o in outs)


async def test_failures_are_named_by_status_length_or_client_timeout() -> None:
    target = Fake(fail={0: "UNAVAILABLE", 2: "hang"}, short={1})
    outs = await open_loop(target, [job(0), job(1), job(2), job(3)], [0.0] * 4, timeout_s=0.05)
    assert [o.error for o in outs] == ["UNAVAILABLE", "WRONG_OUTPUT_LENGTH", "CLIENT_TIMEOUT", None]


async def test_closed_loop_keeps_at_most_n_in_flight_and_sends_each_request_once_in_order() -> None:
    target = Fake()
    outs = await closed_loop(target, [job(i) for i in range(5)], concurrency=2)
    assert target.most_in_flight == 2
    assert target.order == [0, 1, 2, 3, 4]
    assert [o.index for o in outs] == [0, 1, 2, 3, 4] and all(o.error is None for o in outs)
