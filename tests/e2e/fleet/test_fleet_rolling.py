"""Graceful operations (issue 13, point 6): SIGTERM makes a frontend refuse new work (DRAINING,
health NOT_SERVING) while its streams finish, then it leaves the registry and exits; a rolling
restart of both frontends under steady load loses no admitted request, and clients that reconnect
through the other frontend with Resume get every event."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from datetime import UTC, datetime

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import func, select

from control.frontends import generation_owner
from control.models import Generation
from datastore.store import Store
from llm.v1 import generations_pb2 as pb
from tests.e2e.fleet.client import (
    Reason,
    generate,
    output_tokens,
    read,
    read_rest,
    reason_of,
    request,
    resume,
    sequences,
)
from tests.e2e.fleet.conftest import KEY_ROLL
from tests.e2e.fleet.harness import Fleet

pytestmark = pytest.mark.fleet
TOKENS = 16


async def test_sigterm_lets_a_frontends_streams_finish_and_refuses_new_work_meanwhile(
    whole_fleet: Fleet, fleet_store: Store
) -> None:
    f1 = whole_fleet.frontends[0]
    assert f1.proc is not None
    async with grpc.aio.insecure_channel(f1.address) as channel:
        call = generate(channel, request(120))
        first = await read(call, 3)
        f1.proc.send_signal(signal.SIGTERM)
        late = []  # admitted before the drain began: they run to their end too
        async with asyncio.timeout(120):
            while True:
                try:
                    late.append(await read_rest(generate(channel, request(2))))
                except grpc.aio.AioRpcError as e:
                    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAVAILABLE, "DRAINING")
                    break
        assert all(events[-1].finished.reason == Reason.OUTPUT_LIMIT for events in late)
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=60)
        assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
        events = first + await read_rest(call)  # the stream in flight finishes
    assert sequences(events) == list(range(1, len(events) + 1))
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and len(output_tokens(events)) == 120
    assert await asyncio.to_thread(f1.proc.wait, 180) == 0
    with fleet_store.transaction() as session:  # it left the registry: nothing is forwarded to it
        owner = generation_owner(session, "alpha", events[0].generation_id, now=datetime.now(UTC))
    assert owner.frontend_id is not None and owner.relay_address == ""


async def test_a_draining_frontend_relays_no_new_stream_and_finishes_those_it_relays(
    whole_fleet: Fleet,
) -> None:
    """A stream f1 passes on from f2 (the generation's owner) is one of f1's streams: its drain
    waits for it to end. A Resume sent to f1 once it drains is refused DRAINING, not relayed."""
    f1, f2 = whole_fleet.frontends
    assert f1.proc is not None
    async with grpc.aio.insecure_channel(f1.address) as a, grpc.aio.insecure_channel(f2.address) as b:
        direct = generate(b, request(300))  # long enough to outlast the server's 5 s stop grace
        first = await read(direct, 2)
        relayed = resume(a, first[0].generation_id, first[-1].sequence)
        events = first + await read(relayed, 2)
        direct.cancel()  # the relayed stream is the generation's only follower now
        f1.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(120):
            while True:  # until f1 has begun to drain, a new Resume is relayed (and dropped here)
                probe = resume(a, first[0].generation_id, events[-1].sequence)
                try:
                    await read(probe, 1)
                except grpc.aio.AioRpcError as e:
                    assert (e.code(), reason_of(e)) == (grpc.StatusCode.UNAVAILABLE, "DRAINING")
                    break
                probe.cancel()
        events += await read_rest(relayed)
    assert sequences(events) == list(range(1, len(events) + 1))
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and len(output_tokens(events)) == 300
    assert await asyncio.to_thread(f1.proc.wait, 180) == 0


class Switch(Exception):
    """The client drops its stream on purpose, to resume through the other frontend."""


async def test_a_rolling_restart_under_steady_load_loses_no_admitted_request(
    whole_fleet: Fleet, fleet_store: Store
) -> None:
    fleet = whole_fleet
    results: list[list[pb.GenerationEvent]] = []
    seen: Counter[str] = Counter()  # how the clients got through: reconnects by reason
    stop = asyncio.Event()

    async def one(n: int) -> list[pb.GenerationEvent]:
        """Request n, through frontend n % 2 or, when that one refuses or is down, the other. A
        stream that breaks resumes through the other frontend; every third request drops its
        stream after three events on purpose and resumes there."""
        req, target, drop = request(TOKENS, request_id=f"roll-{n}"), n % 2, n % 3 == 0
        events: list[pb.GenerationEvent] = []
        async with asyncio.timeout(300):
            while True:
                try:
                    async with grpc.aio.insecure_channel(fleet.frontends[target].address) as channel:
                        if events:
                            call = resume(channel, events[0].generation_id, events[-1].sequence, KEY_ROLL)
                            seen["resumed"] += 1
                        else:
                            call = generate(channel, req, KEY_ROLL)
                        while (event := await call.read()) is not grpc.aio.EOF:
                            events.append(event)
                            if drop and len(events) == 3:
                                drop = False
                                call.cancel()
                                raise Switch
                        if events and events[-1].HasField("finished"):
                            return events
                except Switch:
                    pass
                except grpc.aio.AioRpcError as e:  # refused (DRAINING) or down: the other frontend
                    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
                    seen[reason_of(e) or "unreachable"] += 1
                    await asyncio.sleep(0.05)
                target = 1 - target

    async def client(k: int) -> None:
        n = k
        while not stop.is_set():
            results.append(await one(n))
            n += 3

    async def served(more: int) -> None:
        wanted = len(results) + more
        async with asyncio.timeout(300):
            while len(results) < wanted:
                await asyncio.sleep(0.1)

    clients = [asyncio.create_task(client(k)) for k in range(3)]
    try:
        for frontend in fleet.frontends:
            await served(3)
            assert frontend.proc is not None
            frontend.proc.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(frontend.proc.wait, 180) == 0
            frontend.start()  # a new process: a new frontend id, the same ports
            await asyncio.to_thread(fleet.wait_ready, frontend)
        await served(3)
    finally:
        stop.set()
        await asyncio.gather(*clients)
    for events in results:
        assert sequences(events) == list(range(1, len(events) + 1)), sequences(events)
        assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and len(output_tokens(events)) == TOKENS
    dropping = sum(int(events[0].started.request_id.removeprefix("roll-")) % 3 == 0 for events in results)
    assert dropping > 0 and seen["resumed"] >= dropping, seen
    with fleet_store.transaction() as session:
        states = dict(
            session.execute(
                select(Generation.state, func.count())
                .where(Generation.tenant_id == "roll")
                .group_by(Generation.state)
            ).all()
        )
    assert states == {"COMPLETED": len(results)}, (states, seen)
