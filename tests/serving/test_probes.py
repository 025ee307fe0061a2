"""A worker's probes over fakes: the canary's verdicts, when canaries go out, and what fails a
worker (serving/probes.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from types import SimpleNamespace

import pytest

from config.settings import ModelSettings
from frontend.dispatch.worker_client import (
    WorkerCapacityError,
    WorkerChunk,
    WorkerDown,
    WorkerError,
    WorkerLost,
    WorkerRequest,
)
from frontend.dispatch.worker_liveness import Liveness
from frontend.dispatch.worker_pool import WorkerHandle
from serving.probes import CanaryFailed, WorkerProbe, canaries_drained, canary_request, send_canary
from serving.triton_host import ModelNotReady, TritonError
from serving.workers import LocalWorker

HANG = "hang"
LOST_AFTER_ACK = "lost after ack"  # admitted, then its stream broke before the FINAL
VERSION = SimpleNamespace(triton_model_name="m--1", eos_token_id=2, version_id="m@1")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeClient:
    """Answers every request with an admission response then its one token (FINAL: the stream
    ends), an error, or nothing at all."""

    def __init__(self, clock: Clock, answer: Exception | str = "ack") -> None:
        self.clock = clock
        self.answer = answer
        self.liveness: dict[str, Liveness] = {}
        self.sent: list[WorkerRequest] = []
        self.closed = 0
        self.completed = 0  # streams read to their FINAL (closed without a cancellation)

    def liveness_of(self, model: str) -> Liveness:
        return self.liveness.setdefault(model, Liveness(self.clock))

    async def generate(self, req: WorkerRequest) -> AsyncGenerator[WorkerChunk, None]:
        self.sent.append(req)
        try:
            if isinstance(self.answer, Exception):
                raise self.answer
            if self.answer == HANG:
                await asyncio.Event().wait()
            self.liveness_of(req.model).seen()
            yield WorkerChunk([], num_input_tokens=1, num_cached_tokens=0)
            if self.answer == LOST_AFTER_ACK:
                raise WorkerLost("the worker sent nothing for 10s")
            yield WorkerChunk([7])  # the FINAL: generate() returns, nothing is cancelled
            self.completed += 1
        finally:
            self.closed += 1


class FakeServer:
    def __init__(self) -> None:
        self.process = None  # no process to watch the stubs of
        self.problem = ""
        self.checked: list[list[str]] = []
        self.unloading: LocalWorker | None = None  # its versions are retired while a check runs

    def check(self, models: list[str]) -> None:
        self.checked.append(models)
        if self.unloading is not None:  # as serving/worker_set.py unload_everywhere does, then unloads
            self.unloading.versions = []
            raise ModelNotReady(models[0])
        if self.problem:
            raise TritonError(self.problem)


def request() -> WorkerRequest:
    return canary_request(VERSION, "canary-w-1")  # type: ignore[arg-type]


def test_the_canary_is_one_prompt_token_and_one_output_token_outside_every_tenants_cache() -> None:
    req = request()
    assert (req.model, req.prompt_ids, req.max_output_tokens) == ("m--1", (2,), 1)
    assert req.cache_salt == "canary" and req.generation_id == "canary-w-1"


@pytest.mark.parametrize(
    "answer",
    [
        "ack",
        WorkerCapacityError("needs 1 blocks"),  # the engine loop refused it for memory
        WorkerError("internal error: RuntimeError"),  # the worker's own refusal: its loop turned
    ],
)
async def test_a_live_model_answers_the_canary(answer: Exception | str) -> None:
    client = FakeClient(Clock(), answer)
    await send_canary(client, request(), timeout_s=30)  # type: ignore[arg-type]
    await canaries_drained()
    assert client.closed == 1


async def test_the_canary_reads_its_stream_to_the_final_instead_of_cancelling_it() -> None:
    client = FakeClient(Clock())
    await send_canary(client, request(), timeout_s=30)  # type: ignore[arg-type]
    await canaries_drained()
    assert (client.closed, client.completed) == (1, 1)  # ended by its FINAL, not cancelled


async def test_after_its_answer_a_canarys_stream_has_no_say_in_the_verdict() -> None:
    """Its one token can wait behind long prefill steps on a slow host; the admission answer
    already showed the loop alive, so a stream that breaks after it fails nothing."""
    client = FakeClient(Clock(), LOST_AFTER_ACK)
    await send_canary(client, request(), timeout_s=30)  # type: ignore[arg-type]
    await canaries_drained()
    assert (client.closed, client.completed) == (1, 0)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (WorkerDown("Stub process 'm--1_0_0' is not healthy."), "refused by Triton"),
        (WorkerLost("worker stream broke: AioRpcError"), "stream lost"),
        (HANG, "unanswered for 0.05s"),
    ],
)
async def test_a_dead_or_stopped_model_fails_the_canary(answer: Exception | str, why: str) -> None:
    client = FakeClient(Clock(), answer)
    with pytest.raises(CanaryFailed, match=why):
        await send_canary(client, request(), timeout_s=0.05)  # type: ignore[arg-type]
    assert client.closed == 1


def probe_of(client: FakeClient, server: FakeServer) -> WorkerProbe:
    worker = LocalWorker("w", server, [(ModelSettings(), VERSION)])  # type: ignore[arg-type,list-item]
    handle = WorkerHandle("w", "w", client)  # type: ignore[arg-type]
    client.liveness_of("m--1")  # its last sign of life: now
    return WorkerProbe(worker, handle, interval_s=2.0, timeout_s=0.05, clock=client.clock)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_canary_goes_only_to_a_model_silent_for_the_probe_interval() -> None:
    clock = Clock()
    client, server = FakeClient(clock), FakeServer()
    probe = probe_of(client, server)
    assert await probe.failure() is None
    assert server.checked == [["m--1"]] and client.sent == []
    clock.now = 1.9
    assert await probe.failure() is None
    assert client.sent == [] and len(server.checked) == 1  # the next identity check is due at 2.0
    clock.now = 2.0
    assert await probe.failure() is None
    await settle()
    assert [r.generation_id for r in client.sent] == ["canary-w-1"] and len(server.checked) == 2
    assert await probe.failure() is None  # answered: the model was seen at 2.0
    clock.now = 3.0
    assert await probe.failure() is None
    assert len(client.sent) == 1


async def test_a_failed_canary_fails_the_worker() -> None:
    clock = Clock()
    client = FakeClient(clock, WorkerDown("Stub process 'm--1_0_0' is not healthy."))
    probe = probe_of(client, FakeServer())
    clock.now = 5.0  # silent since 0
    assert await probe.failure() is None  # the canary goes out
    await settle()
    failure = await probe.failure()
    assert failure is not None and "model m--1" in failure and "refused by Triton" in failure


async def test_an_unanswered_canary_fails_the_worker() -> None:
    clock = Clock()
    client = FakeClient(clock, HANG)
    probe = probe_of(client, FakeServer())
    clock.now = 5.0
    assert await probe.failure() is None
    async with asyncio.timeout(30):  # the bound is against a hang only
        while (failure := await probe.failure()) is None:
            await asyncio.sleep(0.01)
    assert "unanswered" in failure


async def test_another_server_on_the_port_or_a_model_not_ready_fails_the_worker() -> None:
    server = FakeServer()
    server.problem = "127.0.0.1:8001 is answered by another server ('triton'), not this launch"
    probe = probe_of(FakeClient(Clock()), server)
    assert await probe.failure() == server.problem


async def test_a_model_not_ready_fails_the_worker_only_while_the_worker_still_serves_it() -> None:
    clock = Clock()
    server = FakeServer()
    probe = probe_of(FakeClient(clock), server)
    server.unloading = probe.worker  # its version is retired while the check is in flight
    assert await probe.failure() is None
    assert server.checked == [["m--1"]]
    server.unloading = None
    assert await probe.failure() is None  # checked again at once, with no version left
    assert server.checked == [["m--1"], []]

    served = FakeServer()
    served.unloading = probe_of(FakeClient(clock), served).worker  # another worker's versions change
    probe = probe_of(FakeClient(clock), served)
    assert await probe.failure() == "model m--1 is not ready"  # this one still serves m--1


async def test_a_canary_refused_as_its_version_unloads_does_not_fail_the_worker() -> None:
    clock = Clock()
    client = FakeClient(clock, WorkerDown("Request for unknown model: 'm--1' is not found"))
    probe = probe_of(client, FakeServer())
    clock.now = 5.0
    assert await probe.failure() is None  # the canary goes out
    await settle()
    probe.worker.versions = []  # retired meanwhile (serving/worker_set.py unload_everywhere)
    assert await probe.failure() is None
    assert len(client.sent) == 1  # and no canary goes to a model the worker no longer serves
    clock.now = 10.0
    assert await probe.failure() is None and len(client.sent) == 1


async def test_an_unanswered_canary_fails_the_worker_even_as_its_version_unloads() -> None:
    clock = Clock()
    client = FakeClient(clock, HANG)  # a hung stub would hold the version's unload for ever
    probe = probe_of(client, FakeServer())
    clock.now = 5.0
    assert await probe.failure() is None
    await settle()
    probe.worker.versions = []
    async with asyncio.timeout(30):  # the bound is against a hang only
        while (failure := await probe.failure()) is None:
            await asyncio.sleep(0.01)
    assert "unanswered" in failure


async def test_reset_drops_the_canaries_in_flight_and_counts_every_model_as_seen() -> None:
    clock = Clock()
    client = FakeClient(clock, HANG)
    probe = probe_of(client, FakeServer())
    clock.now = 5.0
    assert await probe.failure() is None
    await settle()  # the canary is in flight
    await probe.reset()
    assert client.closed == 1 and client.liveness_of("m--1").silent_s() == 0
    assert await probe.failure() is None  # no verdict from the dropped canary
    assert len(client.sent) == 1


def test_a_canary_carries_trace_context_that_is_not_sampled() -> None:
    """So the worker records no span of it (the collector gets nothing from an idle platform's
    canaries); each canary's trace is its own."""
    first, second = (dict(canary_request(VERSION, f"canary-w-{n}").trace_headers) for n in (1, 2))  # type: ignore[arg-type]
    version, trace, parent, flags = first["traceparent"].split("-")
    assert (version, len(trace), len(parent), flags) == ("00", 32, 16, "00")
    assert second["traceparent"].split("-")[1] != trace
