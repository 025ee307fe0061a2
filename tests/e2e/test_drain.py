"""A frontend's drain (SIGTERM in a fleet) waits for a Generate it had let past its DRAINING check
and was still admitting: that request runs to its end before the frontend may stop, instead of
being started after the drain had already found the frontend idle (and then cancelled by its
shutdown)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
import pytest

from frontend.generations import manager as generations
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.e2e.conftest import auth

Reason = pb.Finished.Reason
HOLD_S = 120.0  # hang guard only: the admission is released as soon as the drain has begun


async def test_a_drain_waits_for_a_generation_being_admitted(
    platform: Platform, channel: grpc.aio.Channel, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = platform.manager
    assert manager is not None
    entered, release = threading.Event(), threading.Event()
    admit = generations.admit

    def held(*args: Any, **kwargs: Any) -> Any:  # the store's admission, paused until released
        entered.set()
        release.wait(HOLD_S)
        return admit(*args, **kwargs)

    monkeypatch.setattr(generations, "admit", held)
    exactly = pb.SamplingParams(ignore_eos=True)
    req = pb.GenerateRequest(model="smollm2-135m", prompt="Count:", max_output_tokens=6, sampling=exactly)
    stub = generations_pb2_grpc.GenerationsStub(channel)
    call = stub.Generate(req, metadata=auth(), timeout=180)
    try:
        assert await asyncio.to_thread(entered.wait, HOLD_S)  # past the DRAINING check, admitting
        drain = asyncio.create_task(manager.drain(HOLD_S))
        await asyncio.sleep(0)  # the drain has looked once: without the count it is done here
        assert manager.draining and not manager.live.idle() and not drain.done()
        release.set()
        events = [event async for event in call]
        assert await drain  # idle once the admitted run ended and its stream took every event
    finally:
        release.set()
        manager.draining = False  # the session's frontend serves the other tests
        platform.pool.changed.set()  # and its health says so again at once
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    assert sum(len(e.delta.token_ids) for e in events if e.HasField("delta")) == 6
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
