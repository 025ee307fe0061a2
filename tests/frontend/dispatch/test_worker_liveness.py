"""The inactivity timer: a stream waits while its model shows any sign of life, and is lost once
the model has been silent for the timeout. A fake clock; nothing sleeps for real beyond the tiny
timeouts the timer waits in, and every outcome is awaited as a condition."""

from __future__ import annotations

import asyncio

import pytest

from frontend.dispatch.worker_liveness import Liveness, answer_within

T = 0.05  # the timeout: the timer's real waits are no longer, and the fake clock decides the verdict


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_remaining_counts_from_the_later_of_the_wait_and_the_last_sign_of_life() -> None:
    clock = Clock()
    liveness = Liveness(clock)
    clock.now = 103.0
    assert liveness.silent_s() == 3.0
    assert liveness.remaining_s(since=101.0, timeout_s=10.0) == 8.0  # waiting since 101
    liveness.seen()  # another stream of the same model answered at 103
    clock.now = 104.0
    assert liveness.remaining_s(since=101.0, timeout_s=10.0) == 9.0
    clock.now = 113.0
    assert liveness.remaining_s(since=101.0, timeout_s=10.0) == 0.0  # silent 10 s: expired


async def turns(n: int = 10) -> None:
    """Lets the timer wake up a few times (each real wait is at most T)."""
    for _ in range(n):
        await asyncio.sleep(T)


async def test_a_silent_model_loses_the_stream_once_the_timeout_passed() -> None:
    clock = Clock()
    liveness = Liveness(clock)
    never = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(answer_within(never, liveness, timeout_s=T))
    await turns()
    assert not waiting.done()  # on the fake clock no time passed
    clock.now += 2 * T  # silent longer than the timeout
    with pytest.raises(TimeoutError, match=f"sent nothing for {T:g}s"):
        await asyncio.wait_for(waiting, timeout=30)  # the bound is against a hang only
    assert never.cancelled()  # the pending read is not left behind


async def test_a_stream_waits_as_long_as_its_model_shows_life_elsewhere() -> None:
    """A long prefill or a request queued in the engine: this stream gets nothing, but the model
    answers others (or a canary), so its wait goes on."""
    clock = Clock()
    liveness = Liveness(clock)
    answer = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(answer_within(answer, liveness, timeout_s=T))
    for _ in range(5):
        clock.now += 0.8 * T  # 4 T in all, never T without a sign of life
        liveness.seen()
        await turns(3)
        assert not waiting.done()
    answer.set_result("tokens")
    assert await asyncio.wait_for(waiting, timeout=30) == "tokens"


async def test_the_timer_runs_only_while_the_stream_waits() -> None:
    """A reader that paused (a slow consumer) did not make the worker silent."""
    clock = Clock()
    liveness = Liveness(clock)
    clock.now += 100 * T  # nothing asked for long
    ready = asyncio.get_running_loop().create_future()
    ready.set_result("buffered")
    assert await answer_within(ready, liveness, timeout_s=T) == "buffered"
    later = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(answer_within(later, liveness, timeout_s=T))
    await turns()
    assert not waiting.done()
    later.set_result("next")
    assert await asyncio.wait_for(waiting, timeout=30) == "next"


async def test_the_reads_own_error_passes_through() -> None:
    liveness = Liveness(Clock())
    broken = asyncio.get_running_loop().create_future()
    broken.set_exception(ConnectionError("reset"))
    with pytest.raises(ConnectionError):
        await answer_within(broken, liveness, timeout_s=T)


async def test_every_stream_waiting_on_a_silent_model_is_lost_and_none_is_left_watched() -> None:
    clock = Clock()
    liveness = Liveness(clock)
    loop = asyncio.get_running_loop()
    reads = [loop.create_future() for _ in range(3)]
    waiting = [asyncio.ensure_future(answer_within(r, liveness, timeout_s=T)) for r in reads]
    await turns(2)
    assert len(liveness.waits) == 3 and not any(w.done() for w in waiting)
    clock.now += 2 * T
    for w in waiting:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(w, timeout=30)  # the bound is against a hang only
    assert all(r.cancelled() for r in reads) and not liveness.waits


async def test_a_stream_cancelled_from_elsewhere_is_cancelled_not_timed_out() -> None:
    """The client went away: its generation's task is cancelled while it waits on the worker."""
    liveness = Liveness(Clock())
    read = asyncio.get_running_loop().create_future()
    waiting = asyncio.ensure_future(answer_within(read, liveness, timeout_s=T))
    await turns(1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert read.cancelled() and not liveness.waits


async def test_a_read_that_answers_despite_the_timeout_is_returned_and_leaves_no_cancellation() -> None:
    clock = Clock()
    liveness = Liveness(clock)
    answer = asyncio.get_running_loop().create_future()

    async def stubborn_read() -> str:
        try:
            return await asyncio.shield(answer)
        except asyncio.CancelledError:  # swallows it: waits for its answer anyway
            return await answer

    async def stream() -> tuple[str, int]:
        item = await answer_within(stubborn_read(), liveness, timeout_s=T)
        current = asyncio.current_task()
        assert current is not None
        return item, current.cancelling()

    reading = asyncio.ensure_future(stream())
    await turns(1)
    clock.now += 2 * T
    while liveness.waits:  # the timer fired: the read was cancelled
        await asyncio.sleep(T)
    answer.set_result("late")
    assert await asyncio.wait_for(reading, timeout=30) == ("late", 0)
