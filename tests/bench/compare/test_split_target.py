"""bench serve's platform-split target: even-indexed requests go over gRPC, odd ones over HTTP."""

from __future__ import annotations

from bench.compare.targets import SplitTarget
from bench.load.driver import Job
from bench.load.metrics import Outcome
from bench.load.workload import RequestSpec


class Recording:
    def __init__(self) -> None:
        self.indexes: list[int] = []

    async def generate(self, job: Job, out: Outcome) -> None:
        self.indexes.append(job.spec.index)


async def test_requests_alternate_between_the_transports() -> None:
    over_grpc, over_http = Recording(), Recording()
    target = SplitTarget(over_grpc, over_http)  # type: ignore[arg-type]
    for i in range(5):
        job = Job(RequestSpec(i, "interactive", 0, None, 8, 4), "p", ())
        await target.generate(job, Outcome(i, "interactive", 0.0, 4))
    assert over_grpc.indexes == [0, 2, 4] and over_http.indexes == [1, 3]
