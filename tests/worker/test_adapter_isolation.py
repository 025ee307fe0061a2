"""One request's failure ends only that request: the engine failing it alone, its sender raising
(admission, a step, its FINAL) or its handle raising when asked about cancellation. The others get
every token and one FINAL, and the engine is kept (no rebuild, no "engine step failed")."""

from __future__ import annotations

import pytest

from tests.worker.fakes import Log, Request, ScriptedEngine, make_adapter, turn
from tests.worker.test_adapter import ADMITTED, assert_one_final, submit
from worker import adapter as adapter_module
from worker.adapter import WorkerAdapter

WHOLE = [ADMITTED, *(({"output_ids": [t]}, False) for t in (101, 102)), ({"output_ids": [103]}, True)]


def engine_of(adapter: WorkerAdapter) -> ScriptedEngine:
    engine = adapter.engine
    assert isinstance(engine, ScriptedEngine)
    return engine


def log_of(adapter: WorkerAdapter) -> list[str]:
    assert isinstance(adapter.log, Log)
    return adapter.log.lines


def test_a_request_the_engine_fails_alone_ends_with_an_internal_error_and_the_rest_go_on() -> None:
    adapter = make_adapter()
    engine = engine_of(adapter)
    a, b, c = Request("a"), Request("b"), Request("c", streaming=False)
    submit(adapter, a, b, c)
    turn(adapter)
    engine.fail_request["b"] = "SamplingError"
    engine.fail_request["c"] = "SamplingError"
    turn(adapter, 2)
    assert a.sent == WHOLE
    assert b.sent == [ADMITTED, ({"output_ids": [101]}, False), ("internal error: SamplingError", True)]
    assert c.sent == [("internal error: SamplingError", True)]  # its held tokens are not sent
    assert adapter.engine is engine and adapter.live == {}
    assert log_of(adapter) == [
        "request b failed in the engine: SamplingError",
        "request c failed in the engine: SamplingError",
    ]


def test_a_sender_that_raises_mid_stream_ends_only_its_request() -> None:
    adapter = make_adapter()
    engine = engine_of(adapter)
    a, b = Request("a"), Request("b", out=5)
    submit(adapter, a, b)
    turn(adapter)
    b.sender.failures.append(RuntimeError("stub gone"))
    turn(adapter, 3)
    assert a.sent == WHOLE
    assert b.sent == [ADMITTED, ({"output_ids": [101]}, False), ("internal error: RuntimeError", True)]
    assert "b" not in engine.running and adapter.engine is engine and adapter.live == {}
    assert log_of(adapter) == ["request b failed: RuntimeError"]


def test_a_final_send_that_raises_is_followed_by_an_error_final() -> None:
    adapter = make_adapter()
    engine = engine_of(adapter)
    a, b = Request("a"), Request("b", streaming=False, out=2)
    submit(adapter, a, b)
    b.sender.failures.append(RuntimeError("closed"))  # its one response, which carries FINAL
    turn(adapter, 3)
    assert a.sent == WHOLE
    assert b.sent == [("internal error: RuntimeError", True)]
    assert adapter.engine is engine and adapter.live == {} and not engine.has_unfinished()


def test_a_sender_that_raises_on_admission_ends_only_its_request() -> None:
    adapter = make_adapter()
    engine = engine_of(adapter)
    a, b = Request("a"), Request("b")
    b.sender.failures.append(RuntimeError("gone"))
    submit(adapter, a, b)
    turn(adapter, 3)
    assert a.sent == WHOLE
    assert b.sent == [("internal error: RuntimeError", True)]
    assert "b" not in engine.running and adapter.engine is engine and adapter.live == {}


def test_a_request_whose_cancellation_check_raises_ends_alone() -> None:
    adapter = make_adapter()
    engine = engine_of(adapter)
    a, b = Request("a"), Request("b", out=5)
    submit(adapter, a, b)
    turn(adapter)
    b.fail_check = RuntimeError("handle gone")
    turn(adapter, 2)
    assert a.sent == WHOLE
    assert b.sent == [ADMITTED, ({"output_ids": [101]}, False), ("internal error: RuntimeError", True)]
    assert b.checks == 2  # never asked again
    assert "b" not in engine.running and adapter.engine is engine and adapter.live == {}


def test_a_sender_that_never_recovers_ends_its_request_without_touching_the_others() -> None:
    adapter = make_adapter()
    a, b = Request("a"), Request("b", out=5)
    submit(adapter, a, b)
    turn(adapter)
    b.sender.failures.extend(RuntimeError("gone") for _ in range(2))  # the error FINAL fails too
    turn(adapter, 2)
    assert a.sent == WHOLE
    assert b.sent == [ADMITTED, ({"output_ids": [101]}, False)]
    assert log_of(adapter) == ["request b failed: RuntimeError", "could not end request b: RuntimeError"]
    assert_one_final(a)


def test_a_retry_under_the_id_of_a_request_that_failed_alone_is_a_request_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frontend retries under the same request id (the generation's). A request that failed in
    its own step's response is aborted in the engine, whose ABORTED for it comes out of the next
    step: a retry admitted before then must not take that ABORTED as its own end."""
    adapter = make_adapter()
    engine = engine_of(adapter)
    first = Request("g", out=5)
    submit(adapter, first)
    turn(adapter)

    def unbuildable(*step: object) -> object:
        raise MemoryError()

    monkeypatch.setattr(adapter_module, "step_outputs", unbuildable)
    turn(adapter)  # its second token's response cannot be built: it alone ends, aborted in the engine
    monkeypatch.undo()
    retry = Request("g", out=2)
    submit(adapter, retry)
    turn(adapter, 3)
    assert first.sent == [ADMITTED, ({"output_ids": [101]}, False), ("internal error: MemoryError", True)]
    assert retry.sent == [ADMITTED, ({"output_ids": [101]}, False), ({"output_ids": [102]}, True)]
    assert adapter.live == {} and not engine.has_unfinished()
    assert log_of(adapter) == ["request g failed: MemoryError"]


def test_an_engine_that_cannot_be_rebuilt_refuses_requests_until_a_build_succeeds() -> None:
    """The loop survives a failed rebuild after a failed step (the memory the step ran out of may
    still be short): meanwhile requests are refused for capacity, and builds are tried again after
    1 s, then 2 s (the fake clock advances 0.25 s a reading)."""
    failures, built = [MemoryError("no room for the KV pool")] * 2, []

    def new_engine() -> ScriptedEngine:
        if failures:
            raise failures.pop()
        built.append(ScriptedEngine())
        return built[-1]

    adapter = make_adapter(new_engine=new_engine)
    live = Request("live", out=5)
    submit(adapter, live)
    turn(adapter)
    engine_of(adapter).fail_step = RuntimeError("boom")
    turn(adapter)
    assert live.sent[-1] == ("internal error: RuntimeError", True)
    refused = Request("refused")
    submit(adapter, refused)
    turn(adapter)
    assert refused.sent == [("capacity: the engine is being rebuilt after a failed step", True)]
    for _ in range(100):
        if built:
            break
        turn(adapter)
    assert built and adapter.engine is built[0]
    assert log_of(adapter) == [
        "engine step failed: RuntimeError: boom",
        "engine rebuild failed: MemoryError: no room for the KV pool; next try in 1 s",
        "engine rebuild failed: MemoryError: no room for the KV pool; next try in 2 s",
    ]
    later = Request("later", out=1)
    submit(adapter, later)
    turn(adapter)
    assert later.sent == [ADMITTED, ({"output_ids": [101]}, True)]
    assert_one_final(live, refused, later)
