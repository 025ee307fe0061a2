"""The load driver: sends a workload to one target, open loop (each request at its scheduled offset,
whether or not earlier ones finished) or closed loop (a fixed number of clients, each sending its
next request when the last one finished), and records what the client saw. Every target is driven
by this same code, so TTFT includes any queue wait in the target, whatever the target."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from bench.load.metrics import Outcome
from bench.load.workload import Load, RequestSpec, poisson_offsets

Clock = Callable[[], float]


@dataclass(slots=True, frozen=True)
class Job:
    """One request ready to send: its spec and its prompt as text and as the model's token ids."""

    spec: RequestSpec
    prompt: str
    prompt_ids: tuple[int, ...]


class TargetError(Exception):
    """A request failed at the target; `status` names how (a gRPC status name, FINISHED_<reason>)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class Target(Protocol):
    name: str

    async def generate(self, job: Job, out: Outcome) -> None:
        """Runs the request to its end, appending each token delivery to `out.deliveries` (and
        setting `out.cached_tokens` where the target reports it); raises TargetError on failure."""
        ...


async def one(target: Target, job: Job, sent: float, timeout_s: float, clock: Clock) -> Outcome:
    out = Outcome(job.spec.index, job.spec.kind, sent, job.spec.output_tokens)
    try:
        await asyncio.wait_for(target.generate(job, out), timeout_s)
        if out.output_tokens != job.spec.output_tokens:
            out.error = "WRONG_OUTPUT_LENGTH"
    except TargetError as e:
        out.error = e.status
    except TimeoutError:
        out.error = "CLIENT_TIMEOUT"
    out.end = clock()
    return out


async def open_loop(
    target: Target,
    jobs: list[Job],
    offsets: list[float],
    timeout_s: float = 600.0,
    clock: Clock = time.perf_counter,
) -> list[Outcome]:
    """Sends jobs[i] at offsets[i] seconds after the start; TTFT counts from that scheduled time."""
    start = clock()
    tasks = []
    for job, offset in zip(jobs, offsets, strict=True):
        await asyncio.sleep(max(0.0, start + offset - clock()))
        tasks.append(asyncio.create_task(one(target, job, start + offset, timeout_s, clock)))
    return list(await asyncio.gather(*tasks))


async def closed_loop(
    target: Target,
    jobs: list[Job],
    concurrency: int,
    timeout_s: float = 600.0,
    clock: Clock = time.perf_counter,
) -> list[Outcome]:
    """`concurrency` clients take the jobs in order; each sends its next one when the last ended."""
    queue: Iterator[Job] = iter(jobs)
    done: list[Outcome] = []

    async def client() -> None:
        for job in queue:  # a shared iterator: each job goes to exactly one client
            done.append(await one(target, job, clock(), timeout_s, clock))

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return sorted(done, key=lambda o: o.index)


async def drive(target: Target, jobs: list[Job], load: Load, seed: int, timeout_s: float) -> list[Outcome]:
    """The jobs under `load`: Poisson arrivals at its rate (seeded), or its closed-loop clients."""
    if load.rate is not None:
        return await open_loop(target, jobs, poisson_offsets(len(jobs), load.rate, seed), timeout_s)
    assert load.concurrency is not None
    return await closed_loop(target, jobs, load.concurrency, timeout_s)
