"""The retained event log: readers from any cursor see every event once, in order; limits hold."""

from __future__ import annotations

import asyncio

import pytest

from frontend.generations.stream_log import CursorExpired, EventLog
from llm.v1 import generations_pb2 as pb


def event(seq: int, text: str = "x") -> pb.GenerationEvent:
    return pb.GenerationEvent(generation_id="g", epoch=1, sequence=seq, delta=pb.Delta(text=text))


async def collect(log: EventLog, after: int) -> list[int]:
    return [e.sequence async for e in log.follow(after)]


async def test_reader_gets_retained_then_live_events_without_gap_or_duplicate() -> None:
    log = EventLog("g")
    for s in (1, 2, 3):
        log.append(event(s))
    reader = asyncio.create_task(collect(log, 1))
    await asyncio.sleep(0)
    for s in (4, 5):
        log.append(event(s))
        await asyncio.sleep(0)
    log.close()
    assert await reader == [2, 3, 4, 5]
    assert await collect(log, 0) == [1, 2, 3, 4, 5]  # a late reader replays from the start
    assert await collect(log, 5) == []
    assert log.readers == 0


async def test_several_readers_each_see_every_event() -> None:
    log = EventLog("g")
    readers = [asyncio.create_task(collect(log, 0)) for _ in range(3)]
    await asyncio.sleep(0)
    assert log.readers == 3
    for s in range(1, 6):
        log.append(event(s))
    log.close()
    assert [await r for r in readers] == [[1, 2, 3, 4, 5]] * 3


async def test_event_limit_drops_the_oldest_and_expires_old_cursors() -> None:
    log = EventLog("g", max_events=3)
    for s in range(1, 6):
        log.append(event(s))
    log.close()
    assert await collect(log, 2) == [3, 4, 5]
    with pytest.raises(CursorExpired):
        await collect(log, 1)


async def test_byte_limit_bounds_memory() -> None:
    big = event(1, "y" * 1000).ByteSize()
    log = EventLog("g", max_bytes=3 * big)
    for s in range(1, 11):
        log.append(event(s, "y" * 1000))
    log.close()
    assert await collect(log, 7) == [8, 9, 10]
    with pytest.raises(CursorExpired):
        await collect(log, 6)


async def test_a_reader_inside_its_grace_comes_back_expired() -> None:
    log = EventLog("g", max_events=2)
    log.append(event(1))
    follower = log.follow(0)
    assert (await anext(follower)).sequence == 1
    await follower.aclose()  # the client went away: nobody holds the log back
    for s in range(2, 6):
        log.append(event(s))
    assert log.retained == 2
    with pytest.raises(CursorExpired):
        await collect(log, 1)


async def test_an_attached_reader_is_never_lapped_the_producer_waits_for_room() -> None:
    log = EventLog("g", max_events=3)
    cursor = log.attach(0)
    for s in (1, 2, 3):
        assert log.has_room()
        log.append(event(s))
    assert not log.has_room()
    assert await log.wait_for_room(0) is False  # no room now: too slow at once
    waiter = asyncio.create_task(log.wait_for_room(60))
    await asyncio.sleep(0)
    assert log.paused and not waiter.done()
    log.advance(cursor, 1)
    assert await waiter is True and not log.paused
    log.append(event(4))  # drops 1, which the reader has consumed
    assert log.retained == 3
    log.close()
    assert await collect(log, 1) == [2, 3, 4]
    with pytest.raises(CursorExpired):
        await collect(log, 0)


async def test_a_producer_that_does_not_wait_overshoots_but_drops_nothing_unconsumed() -> None:
    log = EventLog("g", max_events=3)
    cursor = log.attach(0)
    for s in range(1, 6):  # e.g. the closing usage and finished, appended without waiting
        log.append(event(s))
    assert log.retained == 5
    log.advance(cursor, 4)
    log.append(event(6))  # back within limits: 4 and older go
    assert log.retained == 3
    log.close()
    assert await collect(log, 3) == [4, 5, 6]
    with pytest.raises(CursorExpired):
        await collect(log, 2)


async def test_the_slowest_reader_holds_the_log_and_one_leaving_makes_room() -> None:
    log = EventLog("g", max_events=2)
    fast, slow = log.attach(0), log.attach(0)
    log.append(event(1))
    log.append(event(2))
    log.advance(fast, 2)
    assert log.readers == 2 and not log.has_room()
    waiter = asyncio.create_task(log.wait_for_room(60))
    await asyncio.sleep(0)
    log.detach(slow)
    assert await waiter is True
    log.detach(slow)  # harmless
    log.append(event(3))
    assert log.readers == 1 and log.retained == 2


async def test_unconsumed_bytes_hold_the_producer() -> None:
    big = event(1, "y" * 1000).ByteSize()
    log = EventLog("g", max_bytes=2 * big)
    cursor = log.attach(0)
    log.append(event(1, "y" * 1000))
    assert log.has_room()
    log.append(event(2, "y" * 1000))
    assert not log.has_room()
    log.advance(cursor, 1)
    assert log.has_room()


async def test_follow_consumes_as_it_hands_out_and_advance_stops_at_the_last_event() -> None:
    log = EventLog("g", max_events=2)
    log.append(event(1))
    log.append(event(2))
    follower = log.follow(0)
    assert (await anext(follower)).sequence == 1
    assert log.readers == 1 and log.has_room()  # 1 handed out: one unconsumed event
    log.append(event(3))
    assert not log.has_room()
    await follower.aclose()
    assert log.readers == 0 and log.has_room()
    cursor = log.attach(2)
    log.advance(cursor, 99)
    assert cursor.consumed == 3
    with pytest.raises(CursorExpired):
        log.attach(0)


def test_sequences_must_follow_and_a_closed_log_takes_nothing() -> None:
    log = EventLog("g")
    with pytest.raises(ValueError, match="expected 1"):
        log.append(event(2))
    log.append(event(1))
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append(event(2))


async def test_events_of_an_older_epoch_are_dropped() -> None:
    log = EventLog("g")
    assert log.append(event(1))
    newer = pb.GenerationEvent(generation_id="g", epoch=2, sequence=2, delta=pb.Delta(text="y"))
    assert log.append(newer)
    stale = pb.GenerationEvent(generation_id="g", epoch=1, sequence=3, delta=pb.Delta(text="late"))
    assert not log.append(stale)
    assert log.last_sequence == 2
    log.close()
    assert [(e.epoch, e.sequence) async for e in log.follow(0)] == [(1, 1), (2, 2)]
