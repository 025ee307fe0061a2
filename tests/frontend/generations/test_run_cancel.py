"""How a run ends when it is cancelled at awkward moments: while it waits for room for an event a
slow reader holds back, while it is already ending (a second cancel), and while it seals its own end.
Every path ends the stream with exactly one `finished` whose usage is what the client was sent.

The run loop, the generation's events, its log, the dispatcher and the live registry are the real
ones; the worker, the usage aggregator and the two store calls of a run (its attempt's start and its
recorded end) are fakes at the boundary below the run loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest
from opentelemetry import trace

from billing.errors import UsageNotDurable
from billing.usage import UsageReport
from config.settings import FrontendSettings, StoreSettings
from contracts.tier import INTERACTIVE
from control.states import GenerationState
from frontend.dispatch.dispatcher import Dispatcher
from frontend.dispatch.worker_client import WorkerChunk, WorkerRequest
from frontend.dispatch.worker_pool import WorkerHandle, WorkerPool
from frontend.generations import manager as generations_module
from frontend.generations import run_loop as run_loop_module
from frontend.generations.live import LiveGeneration, LiveRegistry
from frontend.generations.manager import GenerationManager
from frontend.generations.run import GenerationRun
from frontend.generations.run_loop import RunLoop
from frontend.generations.stream_log import EventLog
from frontend.generations.telemetry import observe_generation
from frontend.generations.validation import GenerationParams
from frontend.metrics import FrontendMetrics
from llm.v1 import generations_pb2 as pb

VERSION = "m@1"
METRICS = FrontendMetrics()
Reason = pb.Finished.Reason


class Detokenizer:
    def step(self, token: int) -> str:
        return f"<{token}>"


class Worker:
    """The admission chunk, then one token a chunk; with `gate`, each token waits for a put."""

    def __init__(self, tokens: list[int], gate: asyncio.Queue[None] | None = None) -> None:
        self.tokens, self.gate = tokens, gate

    async def generate(self, req: WorkerRequest) -> AsyncIterator[WorkerChunk]:
        yield WorkerChunk([], len(req.prompt_ids), 0)
        for token in self.tokens:
            if self.gate is not None:
                await self.gate.get()
            yield WorkerChunk([token])


class Aggregator:
    """Takes usage reports; `flush_final` waits for `release` when it is given one, and raises
    `error` when set (the store away)."""

    def __init__(self) -> None:
        self.reports: list[UsageReport] = []
        self.flushing = asyncio.Event()
        self.release: asyncio.Event | None = None
        self.error: Exception | None = None

    def report(self, report: UsageReport) -> None:
        self.reports.append(report)

    async def flush(self) -> None:
        pass

    async def flush_final(self, generation_id: str, epoch: int) -> None:
        self.flushing.set()
        if self.release is not None:
            await self.release.wait()
        if self.error is not None:
            raise self.error


class Loop(RunLoop):
    """The run loop with its two store calls recorded here: the attempt starts at epoch 1, and each
    recorded end is kept (`lapsed`: as if its lease had lapsed, recorded INTERRUPTED)."""

    ends: list[tuple[GenerationState, str]]
    lapsed = False

    async def _assigned(self, live: LiveGeneration, run: GenerationRun) -> None:
        live.lease = cast(Any, SimpleNamespace(generation_id=live.generation_id, epoch=1))
        run.epoch = 1

    def _end(self, live: LiveGeneration, state: GenerationState, reason: str, withdraw: bool = False) -> bool:
        self.ends.append((state, reason))
        return self.lapsed


def started(
    worker: Worker, registry: LiveRegistry | None = None, final_usage_wait_s: float = 30.0, **settings: Any
) -> tuple[Loop, LiveGeneration]:
    """A run of generation g1 on `worker`, its task started, a reader attached from the start."""
    pool = WorkerPool()
    pool.add(WorkerHandle("w1", "w1", cast(Any, worker), capacity={VERSION: 100}))
    gateway = FrontendSettings(**{"usage_every_tokens": 2, **settings})
    registry = registry or LiveRegistry(gateway.disconnect_grace_s, gateway.stream_retain_s)
    store = StoreSettings(final_usage_wait_s=final_usage_wait_s)
    loop = Loop(cast(Any, None), cast(Any, Aggregator()), Dispatcher(pool), registry, gateway, store,
                lambda: datetime.now(UTC), METRICS)  # fmt: skip
    loop.ends = []
    version = SimpleNamespace(
        version_id=VERSION,
        triton_model_name="m",
        eos_token_id=2,
        tokenizer=SimpleNamespace(detokenizer=Detokenizer),
        manifest=SimpleNamespace(quantization="none"),
    )
    params = GenerationParams(max_output_tokens=8)
    run = GenerationRun("g1", "r1", cast(Any, version), (5, 6, 7), params, "salt", epoch=0,
                        usage_every_tokens=2, usage_every_s=gateway.usage_every_s)  # fmt: skip
    live = LiveGeneration("g1", "t1", EventLog("g1", gateway.stream_max_events, gateway.stream_max_bytes))
    live.observer = observe_generation(trace.NoOpTracer(), METRICS, generation_id="g1", request_id="r1",
                                       tenant="t1", version=VERSION, prompt_tokens=3, max_output_tokens=8,
                                       tier=INTERACTIVE, received_ns=0, received_s=0.0)  # fmt: skip
    registry.add(live)
    live.task = asyncio.create_task(loop.run(live, run, run.ticket("t1", 16)))
    return loop, live


async def ended(live: LiveGeneration) -> None:
    assert live.task is not None
    await asyncio.wait({live.task})


def aggregator(loop: Loop) -> Aggregator:
    return cast(Aggregator, loop.aggregator)


async def until(condition: Any) -> None:
    """Lets the event loop run until `condition()` holds (60 s only guards against a hang)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not condition():
        assert loop.time() < deadline, "the condition never held"
        await asyncio.sleep(0)


async def events_of(live: LiveGeneration) -> list[pb.GenerationEvent]:
    return [event async for event in live.log.follow(0, live.log.attach(0))]


def kinds(events: list[pb.GenerationEvent]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in events]


def delivered_tokens(events: list[pb.GenerationEvent]) -> int:
    return sum(len(e.delta.token_ids) for e in events if e.HasField("delta"))


async def test_a_cancel_while_a_slow_reader_holds_the_log_full_ends_after_the_event_it_held_back() -> None:
    loop, live = started(Worker([10, 11, 12, 13, 14, 15]), stream_max_events=4)
    holder = live.log.attach(0)  # a reader that reads nothing: the run waits for room
    await until(lambda: live.log.paused)
    LiveRegistry.cancel(loop.live, live, "CANCELED")
    await ended(live)
    live.log.detach(holder)
    events = await events_of(live)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert kinds(events)[-2:] == ["usage", "finished"] and kinds(events).count("finished") == 1
    finished = events[-1].finished
    assert finished.reason == Reason.CANCELED and live.error is None
    assert (
        finished.usage.output_tokens == delivered_tokens(events) == aggregator(loop).reports[-1].output_tokens
    )
    assert loop.ends == [(GenerationState.CANCELED, "CANCELED")]


async def test_a_second_cancel_during_the_first_ones_clean_up_changes_nothing() -> None:
    gate: asyncio.Queue[None] = asyncio.Queue()
    loop, live = started(Worker([10, 11, 12, 13], gate))
    agg = aggregator(loop)
    agg.release = asyncio.Event()
    gate.put_nowait(None)
    await until(lambda: live.log.last_sequence == 2)  # started, then its first token's delta
    loop.live.cancel(live, "CANCELED")  # a client's CancelGeneration
    await until(agg.flushing.is_set)
    assert live.task is not None
    live.task.cancel()  # then shutdown (LiveRegistry.shutdown cancels every running task)
    agg.release.set()
    await ended(live)
    events = await events_of(live)
    assert kinds(events) == ["started", "delta", "usage", "finished"] and live.error is None
    assert events[-1].finished.reason == Reason.CANCELED and events[-1].finished.usage.output_tokens == 1
    assert loop.ends == [(GenerationState.CANCELED, "CANCELED")]


async def test_two_cancel_generation_calls_at_once_end_the_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gate: asyncio.Queue[None] = asyncio.Queue()
    registry = LiveRegistry(10.0, 300.0)
    loop, live = started(Worker([10, 11, 12, 13], gate), registry)
    manager = GenerationManager(cast(Any, None), loop.aggregator, loop.dispatcher, loop.settings)
    manager.live = registry
    not_ended = SimpleNamespace(already_terminal=False)
    monkeypatch.setattr(generations_module, "request_cancel", lambda *_, **__: not_ended)  # the store's part

    async def get(tenant_id: str, **_: str) -> pb.Generation:
        return pb.Generation()

    monkeypatch.setattr(manager, "get", get)
    asked: list[str] = []

    def cancel(live: LiveGeneration, reason: str, intent_at: float | None = None) -> None:
        asked.append(reason)
        LiveRegistry.cancel(registry, live, reason, intent_at)

    monkeypatch.setattr(registry, "cancel", cancel)
    task = live.task
    assert task is not None
    agg = aggregator(loop)
    agg.release = asyncio.Event()
    gate.put_nowait(None)
    await until(lambda: live.log.last_sequence == 2)  # started, then its first token's delta
    first = asyncio.create_task(manager.cancel("t1", "g1"))
    await until(agg.flushing.is_set)  # the first cancel's clean-up is flushing the final usage
    second = asyncio.create_task(manager.cancel("t1", "g1"))  # e.g. the client's retry of the call
    # until the second call has acted: asked the registry to cancel, or cancelled the task itself
    await until(lambda: len(asked) == 2 or task.cancelling() == 2)
    agg.release.set()
    await asyncio.gather(first, second)
    events = await events_of(live)
    assert kinds(events) == ["started", "delta", "usage", "finished"] and live.error is None
    assert events[-1].finished.reason == Reason.CANCELED
    assert loop.ends == [(GenerationState.CANCELED, "CANCELED")]


@pytest.mark.parametrize("store_away", [False, True])
async def test_a_cancel_while_the_run_seals_its_own_end_keeps_what_the_store_recorded(
    store_away: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lease lapsed meanwhile: recorded INTERRUPTED, usage final. Store still away after
    final_usage_wait_s: INTERRUPTED, usage not final (nothing sealed)."""
    monkeypatch.setattr(run_loop_module, "STORE_RETRY_S", 0.0)
    loop, live = started(Worker([10, 11, 2]), final_usage_wait_s=0.0)
    agg = aggregator(loop)
    agg.release = asyncio.Event()
    if store_away:
        agg.error = UsageNotDurable("g1", 1)
    else:
        loop.lapsed = True
    await until(agg.flushing.is_set)
    loop.live.cancel(live, "CANCELED")
    agg.release.set()
    await ended(live)
    events = await events_of(live)
    assert kinds(events)[-1] == "finished" and kinds(events).count("finished") == 1 and live.error is None
    finished = events[-1].finished
    assert finished.reason == Reason.INTERRUPTED and finished.usage_final is not store_away
    assert loop.ends == ([] if store_away else [(GenerationState.COMPLETED, "COMPLETED")])
