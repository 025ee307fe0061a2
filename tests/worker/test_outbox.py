"""The outbox (worker/outbox.py): calls made on its own thread in the order posted; a stream
whose call raises ends alone with an error FINAL and is reported once; cancellations are reported
by take(), which waits for the checks posted; and the adapter's responses overlap its next step."""

from __future__ import annotations

import threading

import numpy as np

from engine.engine import StepOutput
from tests.worker.fakes import Log, Request, ScriptedEngine, Sender, make_adapter
from worker.outbox import Outbox, Stream
from worker.protocol import Response

WAIT_S = 60.0  # a guard against a hang, never a pace: every wait below is on a condition


def outbox() -> tuple[Outbox, Log]:
    log = Log()
    return Outbox(log), log


class ThreadSender(Sender):
    """Records the thread each response was sent from."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def send(self, response: Response, final: bool) -> None:
        self.threads.append(threading.current_thread().name)
        super().send(response, final)


def test_a_streams_responses_go_out_in_order_from_the_outbox_thread() -> None:
    box, _ = outbox()
    req = Request("a")
    req._sender = ThreadSender()
    stream = Stream("a", req)
    for n in range(5):
        box.send(stream, {"output_ids": np.asarray([100 + n])}, final=n == 4)
    box.close()
    assert [r for r, _ in req.sent] == [{"output_ids": [100 + n]} for n in range(5)]
    assert [f for _, f in req.sent] == [False] * 4 + [True]
    assert set(req._sender.threads) == {"outbox"}


def test_a_stream_whose_send_raises_gets_an_error_final_and_nothing_after_it() -> None:
    box, log = outbox()
    bad, good = Request("bad"), Request("good")
    bad.sender.failures.append(RuntimeError("stub gone"))
    streams = Stream("bad", bad), Stream("good", good)
    for n in range(3):
        for s in streams:
            box.send(s, {"output_ids": np.asarray([n])}, final=n == 2)
    box.flush()
    assert bad.sent == [("internal error: RuntimeError", True)]
    assert good.sent == [({"output_ids": [n]}, n == 2) for n in range(3)]
    taken = box.take()
    assert taken.broken == [streams[0]] and taken.cancelled == []
    assert box.take().broken == []  # reported once
    assert log.lines == ["request bad failed: RuntimeError"]
    box.close()


def test_take_reports_the_cancelled_streams_of_the_checks_it_waits_for() -> None:
    box, _ = outbox()
    a, b, c = Request("a"), Request("b"), Request("c")
    b.cancelled = True
    c.fail_check = RuntimeError("handle gone")
    streams = [Stream(r.rid, r) for r in (a, b, c)]
    box.check(streams)
    taken = box.take()  # no flush first: take() waits for the checks itself
    assert taken.cancelled == [streams[1]] and taken.broken == [streams[2]]
    assert (a.checks, b.checks, c.checks) == (1, 1, 1)
    box.check(streams)
    assert box.take().cancelled == [streams[1]]
    assert c.checks == 1  # a broken stream is never asked again
    box.close()
    assert c.sent == [("internal error: RuntimeError", True)] and a.sent == b.sent == []


class SteppingEngine(ScriptedEngine):
    """Signals each step's start."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0
        self.second_step = threading.Event()

    def step(self) -> list[StepOutput]:
        self.steps += 1
        if self.steps == 2:
            self.second_step.set()
        return super().step()


def test_the_adapters_responses_are_sent_while_its_next_step_runs() -> None:
    """The first token's send waits for the second step to start: were responses sent on the
    loop's thread, the second step could not start until that send returned."""
    engine = SteppingEngine()
    adapter = make_adapter(engine)
    req = Request("g1", out=3)
    seen: list[bool] = []

    class WaitsForTheNextStep(Sender):
        def send(self, response: Response, final: bool) -> None:
            if len(self.sent) == 1:  # after the admission counts: the first token
                seen.append(engine.second_step.wait(WAIT_S))
            super().send(response, final)

    req._sender = WaitsForTheNextStep()
    adapter.submit(req)
    adapter.run_once()  # step 1: its token's send is posted and blocks in the outbox
    adapter.run_once()  # step 2 starts while that send waits
    adapter.run_once()
    adapter.outbox.flush()
    assert seen == [True]
    assert [r for r, _ in req.sent][1:] == [{"output_ids": [101 + n]} for n in range(3)]
    adapter.close()
