"""The retained event log: readers from any cursor see every event once, in order; limits hold."""

from __future__ import annotations

import asyncio

import pytest

from frontend.stream_log import CursorExpired, EventLog
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


async def test_a_reader_lapped_while_following_expires() -> None:
    log = EventLog("g", max_events=2)
    log.append(event(1))
    follower = log.follow(0)
    assert (await anext(follower)).sequence == 1
    for s in range(2, 6):  # the reader is paused; the producer runs far ahead
        log.append(event(s))
    with pytest.raises(CursorExpired):
        await anext(follower)


def test_sequences_must_follow_and_a_closed_log_takes_nothing() -> None:
    log = EventLog("g")
    with pytest.raises(ValueError, match="expected 1"):
        log.append(event(2))
    log.append(event(1))
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append(event(2))
