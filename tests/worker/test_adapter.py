"""The worker adapter against fakes, without Triton: what each response carries, and exactly one
FINAL per request on every path (finished, cancelled, refused, malformed, engine error, unloading)."""

from __future__ import annotations

import threading
from typing import cast

import pytest
import torch

from contracts.tier import Tier
from engine.engine import EngineError, StepOutput
from tests.worker.fakes import Clock, Family, Log, Metric, Request, ScriptedEngine, make_adapter, turn
from worker.adapter import WorkerAdapter
from worker.live_request import CHECK_EVERY, COALESCE_TOKENS
from worker.torch_thread import TorchThread

ADMITTED = ({"output_ids": [], "num_input_tokens": [3], "num_cached_tokens": [1]}, False)


def submit(adapter: WorkerAdapter, *requests: Request) -> None:
    for request in requests:
        adapter.submit(request)


def assert_one_final(*requests: Request) -> None:
    """Each request's last response, and only that one, carries FINAL."""
    for request in requests:
        assert [final for _, final in request.sent] == [False] * (len(request.sent) - 1) + [True], request.rid


def test_a_streamed_request_gets_its_counts_once_then_only_each_steps_tokens() -> None:
    adapter, req = make_adapter(), Request("g1")
    submit(adapter, req)
    turn(adapter, 3)
    assert req.sent == [
        ADMITTED,
        ({"output_ids": [101]}, False),
        ({"output_ids": [102]}, False),
        ({"output_ids": [103]}, True),
    ]
    assert adapter.live == {} and not adapter.engine.has_unfinished()


def test_a_non_streaming_request_gets_one_response_with_every_token_and_count() -> None:
    adapter, req = make_adapter(), Request("g1", streaming=False)
    submit(adapter, req)
    turn(adapter, 3)
    tensors = {"output_ids": [101, 102, 103], "sequence_length": [3], "num_input_tokens": [3],
               "num_cached_tokens": [1], "num_output_tokens": [3]}  # fmt: skip
    assert req.sent == [(tensors, True)]


def test_cancellation_is_checked_once_per_live_request_per_step_and_ends_with_a_bare_final() -> None:
    """The outbox asks during a step (outbox.py): a cancellation is seen during the step after it
    arrived and the engine drops the request at the next boundary, one step later than asking
    before each step would."""
    adapter = make_adapter()
    a, b = Request("a", out=5), Request("b", out=5)
    submit(adapter, a, b)
    turn(adapter)
    a.cancelled = True
    turn(adapter)  # asked during this step: a gets its token, the engine learns of it next turn
    turn(adapter)  # a is aborted before this step runs; its FINAL comes with the step's outputs
    assert (a.checks, b.checks) == (3, 3)
    assert a.sent == [ADMITTED, ({"output_ids": [101]}, False), ({"output_ids": [102]}, False), (None, True)]
    assert [r for r, _ in b.sent][1:] == [{"output_ids": [101 + n]} for n in range(3)]
    assert set(adapter.live) == {"b"}


def test_a_request_the_pool_cannot_take_now_is_refused_for_capacity_at_once() -> None:
    engine = ScriptedEngine()
    engine.full = True
    adapter, req = make_adapter(engine), Request("g1")
    submit(adapter, req)
    turn(adapter)
    assert req.sent == [("capacity: needs 1 blocks, 0 free", True)]
    assert adapter.live == {}


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (Request("no-prompt", prompt=None), "invalid request: input_ids is required"),
        (Request("long", input_lengths=[9]), "invalid request: input_lengths 9 does not fit input_ids of 3"),
        (Request("tier", tier=[7]), "invalid request: 7 is not a valid Tier"),
    ],
    ids=["no-input-ids", "input-lengths", "unknown-tier"],
)
def test_a_malformed_request_is_refused_and_the_others_go_on(request_: Request, message: str) -> None:
    adapter, ok = make_adapter(), Request("ok", out=1)
    submit(adapter, request_, ok)
    turn(adapter)
    assert request_.sent == [(message, True)]
    assert ok.sent == [ADMITTED, ({"output_ids": [101]}, True)]


def test_a_request_the_engine_can_never_serve_is_an_invalid_request() -> None:
    adapter, req = make_adapter(), Request("neg", runtime_top_k=[-1])
    engine = adapter.engine
    assert isinstance(engine, ScriptedEngine)
    engine.fail_add = EngineError("top_k must be at least 0 (0 is off)")
    submit(adapter, req)
    turn(adapter)
    assert req.sent == [("invalid request: top_k must be at least 0 (0 is off)", True)]


def test_a_failed_step_ends_every_live_request_and_the_loop_goes_on_with_a_new_engine() -> None:
    adapter = make_adapter()
    a, b = Request("a", out=5), Request("b", streaming=False, out=5)
    submit(adapter, a, b)
    turn(adapter)
    failing = adapter.engine
    assert isinstance(failing, ScriptedEngine)
    failing.fail_step = RuntimeError("boom")
    turn(adapter)
    assert a.sent[-1] == b.sent[-1] == ("internal error: RuntimeError", True)
    assert_one_final(a, b)
    assert adapter.live == {} and adapter.engine is not failing
    assert isinstance(adapter.log, Log) and adapter.log.lines == ["engine step failed: RuntimeError: boom"]
    later = Request("later", out=1)
    submit(adapter, later)
    turn(adapter)
    assert later.sent == [ADMITTED, ({"output_ids": [101]}, True)]


def test_an_engine_bug_while_admitting_ends_that_request_and_every_live_one() -> None:
    adapter, live = make_adapter(), Request("live", out=5)
    submit(adapter, live)
    turn(adapter)
    engine = adapter.engine
    assert isinstance(engine, ScriptedEngine)
    engine.fail_add = KeyError("bug")
    new = Request("new")
    submit(adapter, new)
    turn(adapter)
    assert new.sent == [("internal error: KeyError", True)]
    assert live.sent[-1] == ("internal error: KeyError", True)
    assert_one_final(new, live)


def test_unloading_ends_queued_and_live_requests_after_what_was_sent() -> None:
    adapter, live, queued = make_adapter(), Request("live"), Request("queued")
    submit(adapter, live)
    turn(adapter)
    submit(adapter, queued)
    adapter.close()
    assert live.sent == [ADMITTED, ({"output_ids": [101]}, False), ("model is unloading", True)]
    assert queued.sent == [("model is unloading", True)]
    assert adapter.metrics.families == []


class StuckEngine(ScriptedEngine):
    """A scripted engine whose steps wait until the test lets them go."""

    def __init__(self) -> None:
        super().__init__()
        self.stepping, self.go = threading.Event(), threading.Event()

    def step(self) -> list[StepOutput]:
        self.stepping.set()
        assert self.go.wait(timeout=60), "the test never let the step go"
        return super().step()


def on_its_thread(adapter: WorkerAdapter) -> TorchThread:
    thread = TorchThread(torch.get_num_threads())  # torch's count is process-wide: left as it is
    adapter.start(thread)
    return thread


def test_a_loop_on_its_thread_ends_its_own_live_requests_when_closed() -> None:
    engine = StuckEngine()
    adapter, live = make_adapter(engine), Request("live", out=50)
    submit(adapter, live)
    thread = on_its_thread(adapter)
    assert engine.stepping.wait(timeout=60)
    engine.go.set()
    adapter.close()
    assert not thread.thread.is_alive()
    assert live.sent[0] == ADMITTED and live.sent[-1] == ("model is unloading", True)
    assert_one_final(live)
    assert adapter.metrics.families == []
    assert isinstance(adapter.log, Log) and adapter.log.lines == []


def test_closing_beside_a_step_that_does_not_return_leaves_the_loop_its_requests() -> None:
    engine = StuckEngine()
    adapter, live, queued = make_adapter(engine), Request("live", out=50), Request("queued")
    submit(adapter, live)
    thread = on_its_thread(adapter)
    assert engine.stepping.wait(timeout=60)
    submit(adapter, queued)
    adapter.close(wait_s=0.01)  # the step cannot return before the test lets it go
    assert isinstance(adapter.log, Log) and adapter.log.lines == [
        "engine loop still in a step after 0.01 s: it ends its own requests"
    ]
    adapter.outbox.flush()
    assert queued.sent == [("model is unloading", True)]
    assert live.sent == [ADMITTED]  # nothing ended beside the loop
    assert adapter.live != {} and adapter.metrics.families != []
    engine.go.set()
    thread.thread.join(timeout=60)
    assert not thread.thread.is_alive()
    assert live.sent[-1] == ("model is unloading", True) and adapter.live == {}
    assert_one_final(live, queued)
    assert adapter.metrics.families == []  # the loop closed what close() left it


def test_every_path_sends_exactly_one_final() -> None:
    engine = ScriptedEngine()
    adapter = make_adapter(engine)
    done, cancelled, whole = (
        Request("done", out=2),
        Request("cancelled", out=9),
        Request("whole", False, out=2),
    )
    submit(adapter, done, cancelled, whole)
    turn(adapter)
    cancelled.cancelled = True
    turn(adapter, 3)
    engine.full = True
    refused, bad = Request("refused"), Request("bad", tier=[0])
    submit(adapter, refused, bad)
    turn(adapter)
    engine.full = False
    failed, unloaded = Request("failed", out=9), Request("unloaded", out=9)
    submit(adapter, failed)
    turn(adapter)
    engine.fail_step = RuntimeError()
    turn(adapter)
    submit(adapter, unloaded)
    turn(adapter)
    adapter.close()
    assert_one_final(done, cancelled, whole, refused, bad, failed, unloaded)


def test_the_request_carries_tier_sampling_salt_and_stop_tokens_to_the_engine() -> None:
    adapter = make_adapter()
    engine = adapter.engine
    assert isinstance(engine, ScriptedEngine)
    plain = Request("plain")
    tuned = Request("tuned", tier=[2], runtime_top_k=[40], runtime_top_p=[0.5], temperature=[0.7],
                    random_seed=[9], cache_salt=[b"tenant"], tenant_weight=[2.0], end_id=[-1])  # fmt: skip
    submit(adapter, plain, tuned)
    turn(adapter)
    a, b = engine.admitted
    assert (a.tier, a.sampling.top_k, a.sampling.top_p, a.stop_token_ids, a.cache_salt, a.weight) == (
        Tier.INTERACTIVE, 0, 1.0, frozenset({2}), "", 1.0
    )  # fmt: skip
    assert (b.tier, b.sampling.top_k, b.sampling.seed, b.stop_token_ids, b.cache_salt, b.weight) == (
        Tier.BATCH, 40, 9, frozenset(), "tenant", 2.0
    )  # fmt: skip
    assert b.sampling.top_p == pytest.approx(0.5) and b.sampling.temperature == pytest.approx(0.7)


def test_the_loop_reports_its_steps_and_where_their_time_went() -> None:
    adapter = make_adapter(clock=Clock(tick=0.25))  # every clock reading is 0.25 s after the last
    submit(adapter, Request("g1", out=2))
    turn(adapter)
    turn(adapter)
    adapter.metrics.publish(adapter.engine.stats, force=True)
    families = {f.name: f for f in cast(list[Family], adapter.metrics.families)}
    loop = families["llm_worker_loop_seconds_total"]
    assert loop.counter
    assert [(m.labels["part"], m.value) for m in loop.metrics] == [
        ("cancel_check", 0.5), ("schedule", 0.25), ("model", 0.25), ("respond", 0.5)
    ]  # fmt: skip  # the engine's 0.5 s split by what it says its scheduler took (SCHEDULE_S a step)
    assert cast(Metric, adapter.metrics.counters["steps"]).value == 2


def test_the_engine_counters_go_on_from_what_was_reported_after_a_rebuild() -> None:
    """A rebuilt engine counts its totals (here the prompt tokens looked up) from zero again."""
    adapter = make_adapter()
    looked_up = cast(Metric, adapter.metrics.counters["prefix_query_tokens"])
    submit(adapter, Request("a", out=5))
    turn(adapter)
    adapter.metrics.publish(adapter.engine.stats, force=True)
    assert looked_up.value == 3
    engine = adapter.engine
    assert isinstance(engine, ScriptedEngine)
    engine.fail_step = RuntimeError("boom")
    turn(adapter)
    assert adapter.engine is not engine
    submit(adapter, Request("b", out=5))
    turn(adapter)
    adapter.metrics.publish(adapter.engine.stats, force=True)
    assert looked_up.value == 6


def test_batch_tier_streams_are_coalesced_while_the_batch_is_large() -> None:
    """From `coalesce_from` requests answered in a step, a BATCH-tier stream gets its first token at
    once, then its tokens COALESCE_TOKENS at a time (the last ones with FINAL); interactive streams
    beside it still get every step's."""
    adapter = make_adapter(coalesce_from=2)
    out = 1 + COALESCE_TOKENS + 2
    batch = Request("b", out=out, tier=[int(Tier.BATCH)])
    interactive = Request("i", out=out)
    submit(adapter, batch, interactive)
    turn(adapter)
    assert batch.sent == [ADMITTED, ({"output_ids": [101]}, False)]  # the first token: never held
    turn(adapter, out - 1)
    assert batch.sent[2:] == [
        ({"output_ids": list(range(102, 102 + COALESCE_TOKENS))}, False),
        ({"output_ids": [102 + COALESCE_TOKENS, 103 + COALESCE_TOKENS]}, True),
    ]
    assert interactive.sent[1:] == [({"output_ids": [101 + n]}, n == out - 1) for n in range(out)]
    assert adapter.live == {}


def test_held_tokens_go_out_as_soon_as_the_batch_is_small_again_or_the_stream_is_cancelled() -> None:
    adapter = make_adapter(coalesce_from=2)
    a = Request("a", out=40, tier=[int(Tier.BATCH)])
    short = Request("s", out=2)
    submit(adapter, a, short)
    turn(adapter)  # two answered: a's first token goes out at once
    turn(adapter)  # a holds 102; the short one finishes
    assert a.sent == [ADMITTED, ({"output_ids": [101]}, False)]
    turn(adapter)  # a alone: below coalesce_from, everything held goes out with its token
    assert a.sent[2:] == [({"output_ids": [102, 103]}, False)]
    b = Request("b", out=8, tier=[int(Tier.BATCH)])
    submit(adapter, b)
    turn(adapter)  # a and b: a holds 104, b's first token goes out
    assert b.sent == [ADMITTED, ({"output_ids": [101]}, False)]
    a.cancelled = True
    turns = 0
    while not a.sent[-1][1]:
        turn(adapter)
        turns += 1
    # coalesced: asked on its own turn, within CHECK_EVERY steps, and aborted at the next boundary
    assert turns <= CHECK_EVERY + 1
    assert a.sent[-1] == (None, True)  # cancelled: a bare FINAL, the held tokens never delivered
    assert a.sent[1:] == [({"output_ids": [101]}, False), ({"output_ids": [102, 103]}, False), (None, True)]
    assert_one_final(a, short)


def test_a_small_batch_never_coalesces_the_batch_tier() -> None:
    adapter = make_adapter()  # the default threshold: far above this batch
    req = Request("b", out=3, tier=[int(Tier.BATCH)])
    submit(adapter, req)
    turn(adapter, 3)
    assert req.sent[1:] == [({"output_ids": [101 + n]}, n == 2) for n in range(3)]


def test_while_coalescing_each_batch_stream_is_asked_about_cancellation_every_check_every_steps() -> None:
    """Each ask is a round trip to tritonserver: while the batch tier is coalesced, a step asks about
    every interactive stream and a share of the batch-tier ones, each of those on its own turn."""
    adapter = make_adapter(coalesce_from=2)
    batch = [Request(f"b{n}", out=60, tier=[int(Tier.BATCH)]) for n in range(2 * CHECK_EVERY)]
    interactive = Request("i", out=60)
    submit(adapter, *batch, interactive)
    turn(adapter)  # nothing answered yet, so nothing coalesced: every stream asked
    assert [r.checks for r in (*batch, interactive)] == [1] * (len(batch) + 1)
    for n in range(1, 4 * CHECK_EVERY + 1):
        turn(adapter)
        assert interactive.checks == 1 + n
        assert sum(r.checks for r in batch) == len(batch) + 2 * n  # two batch streams a step
    assert [r.checks for r in batch] == [5] * len(batch)  # each once in every CHECK_EVERY steps
    for r in batch[1:]:
        r.cancelled = True
    while adapter.live.keys() != {"b0", "i"}:  # every cancelled one is seen on its turn
        turn(adapter)
    before = batch[0].checks
    turn(adapter, 2)  # two streams answered: still coalescing
    assert batch[0].checks - before <= 1
