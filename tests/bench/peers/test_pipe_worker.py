"""The in-process peers' plumbing: PipeWorker matches each reply to its request by id whatever the
order they end in, a failed request fails alone, and a worker that exits fails what still waits;
the OpenVINO worker's loop adds requests between steps and answers each when it has all its tokens.
The worker process here is a stand-in script (the layer under test is the client, not a peer)."""

from __future__ import annotations

import asyncio
import io
import json
import queue
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bench.load.driver import Job, TargetError
from bench.load.metrics import Outcome
from bench.load.workload import RequestSpec
from bench.peers import openvino_worker, ortgenai_worker
from bench.peers.pipe_worker import PipeWorker

# Answers a request of max_tokens k once k requests are waiting, newest first; max_tokens 99 is
# an error; max_tokens 0 makes it exit.
STAND_IN = textwrap.dedent(
    """
    import json, sys
    print(json.dumps({"ready": True, "settings": {"threads": 2}}), flush=True)
    held = []
    for line in sys.stdin:
        r = json.loads(line)
        if r["max_tokens"] == 0:
            sys.exit(3)
        if r["max_tokens"] == 99:
            print(json.dumps({"id": r["id"], "error": "Boom"}), flush=True)
            continue
        held.append(r)
        if len(held) == held[0]["max_tokens"]:
            for h in reversed(held):
                d = [[float(i), 1] for i in range(h["max_tokens"])]
                print(json.dumps({"id": h["id"], "deliveries": d, "finish_reason": "length"}), flush=True)
            held = []
    """
)


def job(index: int, output_tokens: int) -> Job:
    return Job(RequestSpec(index, "interactive", 0, None, 2, output_tokens), "two", (5, 6))


def stand_in(tmp_path: Path) -> PipeWorker:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    return PipeWorker("stand-in", [sys.executable, str(script)], tmp_path / "stand-in.log")


async def run(target: PipeWorker, jobs: list[Job]) -> list[Outcome | BaseException]:
    outs = [Outcome(j.spec.index, "interactive", 0.0, j.spec.output_tokens) for j in jobs]
    done = await asyncio.gather(
        *(target.generate(j, o) for j, o in zip(jobs, outs, strict=True)), return_exceptions=True
    )
    return [o if d is None else d for o, d in zip(outs, done, strict=True)]


def test_replies_find_their_requests_in_any_order_and_an_error_fails_alone(tmp_path: Path) -> None:
    with stand_in(tmp_path) as target:
        assert target.settings == {"threads": 2}
        results = asyncio.run(run(target, [job(0, 2), job(1, 99), job(2, 2)]))
    first, failed, third = results
    assert isinstance(first, Outcome) and len(first.deliveries) == 2
    assert isinstance(third, Outcome) and len(third.deliveries) == 2
    assert isinstance(failed, TargetError) and failed.status == "WORKER_Boom"


def test_a_worker_that_exits_fails_every_request_still_waiting(tmp_path: Path) -> None:
    with stand_in(tmp_path) as target:
        results = asyncio.run(run(target, [job(0, 3), job(1, 0)]))
    assert all(isinstance(r, TargetError) and r.status == "WORKER_EXITED" for r in results)


class FakeHandle:
    def __init__(self, tokens: int) -> None:
        self.left, self.unread = tokens, 0

    def can_read(self) -> bool:
        return self.unread > 0

    def read(self) -> dict[int, Any]:
        out, self.unread = self.unread, 0
        return {0: type("Output", (), {"generated_ids": [7] * out})()}

    def get_status(self) -> str:
        return "FINISHED" if self.left == 0 else "RUNNING"


class FakePipe:
    """One token a step for every request (the worker's loop is the layer under test)."""

    def __init__(self) -> None:
        self.handles: list[FakeHandle] = []

    def add_request(self, rid: int, ids: Any, config: Any) -> FakeHandle:
        self.handles.append(FakeHandle(config.max_new_tokens))
        return self.handles[-1]

    def step(self) -> None:
        for h in self.handles:
            if h.left:
                h.left, h.unread = h.left - 1, h.unread + 1


def test_the_openvino_loop_answers_each_request_with_all_its_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    genai = type(
        "genai",
        (),
        {
            "GenerationConfig": lambda: type("Config", (), {})(),
            "GenerationStatus": type("Status", (), {"FINISHED": "FINISHED", "RUNNING": "RUNNING"}),
        },
    )
    monkeypatch.setitem(sys.modules, "openvino_genai", genai)
    monkeypatch.setitem(sys.modules, "openvino", type("ov", (), {"Tensor": lambda a: a}))
    replies = io.StringIO()
    batch = openvino_worker.Batch(FakePipe(), replies)
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
    for request in (
        {"id": 1, "prompt_ids": [3], "max_tokens": 3},
        {"id": 2, "prompt_ids": [], "max_tokens": 1},
    ):
        inbox.put(request)
    inbox.put({"id": 3, "prompt_ids": [4, 5], "max_tokens": 1})
    inbox.put(None)
    openvino_worker.serve(batch, inbox)
    answers = {a["id"]: a for a in map(json.loads, replies.getvalue().splitlines())}
    assert answers[2] == {"id": 2, "error": "ValueError"}  # an empty prompt fails alone
    assert [k for _, k in answers[1]["deliveries"]] == [1, 1, 1] and answers[1]["finish_reason"] == "length"
    assert [k for _, k in answers[3]["deliveries"]] == [1] and answers[3]["finish_reason"] == "length"


class FakeEvent:
    def __init__(self, request: object, flags: int, finish: str) -> None:
        self.request, self.flags, self.finish_reason, self.error_code = request, flags, finish, "E.NONE"


class FakeRequest:
    def __init__(self, n: int) -> None:
        self.left, self.closed = n, False

    def begin_turn(self, ids: object, turn: object) -> int:
        return 1

    def close(self) -> None:
        self.closed = True


class FakeEngine:
    """Every live request gets a token a run; the last one finishes its turn."""

    def __init__(self) -> None:
        self.requests: list[FakeRequest] = []

    def create_event_buffer(self, capacity: int) -> None:
        return None

    def create_request(self) -> FakeRequest:
        self.requests.append(FakeRequest(0))
        return self.requests[-1]

    def run(self, buffer: object) -> list[FakeEvent]:
        events = []
        for r in self.requests:
            if r.left > 0:
                r.left -= 1
                events.append(FakeEvent(r, 1 | (2 if r.left == 0 else 0), "MAX" if r.left == 0 else "NONE"))
        return events


def test_the_ort_genai_loop_answers_each_request_and_closes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = FakeEngine()

    class Turn:
        def __init__(self, request: FakeRequest) -> None:
            self.request = request

        def set_max_generated_tokens(self, n: int) -> None:
            self.request.left = n

        def set_min_generated_tokens(self, n: int) -> None: ...

        def set_do_sample(self, on: bool) -> None: ...

    og = type("og", (), {"TurnOptions": Turn, "FinishReason": type("FR", (), {"NONE": "NONE"})})
    monkeypatch.setitem(sys.modules, "onnxruntime_genai", og)
    replies = io.StringIO()
    batch = ortgenai_worker.Batch(engine, replies)
    inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
    inbox.put({"id": 1, "prompt_ids": [3], "max_tokens": 3})
    inbox.put({"id": 2, "prompt_ids": [4], "max_tokens": 0})
    inbox.put({"id": 3, "prompt_ids": [4, 5], "max_tokens": 2})
    inbox.put(None)
    ortgenai_worker.serve(batch, inbox)
    answers = {a["id"]: a for a in map(json.loads, replies.getvalue().splitlines())}
    assert answers[2] == {"id": 2, "error": "ValueError"}
    assert len(answers[1]["deliveries"]) == 3 and answers[1]["finish_reason"] == "length"
    assert len(answers[3]["deliveries"]) == 2 and answers[3]["finish_reason"] == "length"
    assert all(r.closed for r in engine.requests)
