"""Replica loss (issue 13, point 5). kill -9 of a frontend mid-stream: the survivor's sweeper ends
its generation INTERRUPTED with sealed usage once the attempt's lease expires, the worker cancels
the orphaned Triton request (its gRPC stream is gone) and frees the blocks, and nothing is billed
twice; meanwhile any frontend answers for the generation from the store, at once. kill -9 of one
of two workers mid-stream: its stream ends INTERRUPTED, and new requests go to the other worker
at once, before its registration has even lapsed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from billing.models import Reservation, Watermark
from control.models import Attempt
from datastore.store import Store
from llm.v1 import admin_pb2, admin_pb2_grpc, usage_pb2, usage_pb2_grpc
from tests.e2e.conftest import auth
from tests.e2e.fleet.client import (
    Reason,
    State,
    cancel,
    generate,
    get,
    metadata_of,
    output_tokens,
    read,
    read_rest,
    reason_of,
    request,
    resume,
    sequences,
)
from tests.e2e.fleet.harness import Fleet, admin
from tests.e2e.worker_metrics import scrape_url, wait_until_idle_at

pytestmark = pytest.mark.fleet
GUARD_S = 120.0  # hang guard of each wait below
ORPHAN_TOKENS = 400  # the killed frontend's generation asks for this many (26 KV blocks of a worker's 40)


async def test_a_frontend_killed_mid_stream_leaves_its_generation_to_the_survivors_sweeper(
    whole_fleet: Fleet, fleet_store: Store
) -> None:
    f1, f2 = whole_fleet.frontends
    since = datetime.now(UTC) - timedelta(seconds=1)
    computed = [_batched(w.metrics_url) for w in whole_fleet.workers]
    async with grpc.aio.insecure_channel(f1.address) as c1, grpc.aio.insecure_channel(f2.address) as c2:
        call = generate(c1, request(ORPHAN_TOKENS))
        seen = await read(call, 8)
        gid = seen[0].generation_id
        f1.kill()
        with pytest.raises(grpc.aio.AioRpcError) as broken:
            await read_rest(call)
        assert broken.value.code() == grpc.StatusCode.UNAVAILABLE
        # never a hang: the survivor answers from the store at once (the owner does not answer)
        with pytest.raises(grpc.aio.AioRpcError) as early:
            await read_rest(resume(c2, gid, seen[-1].sequence))
        assert (early.value.code(), reason_of(early.value)) in {
            (grpc.StatusCode.UNAVAILABLE, "OWNER_UNAVAILABLE"),  # not swept yet
            (grpc.StatusCode.OUT_OF_RANGE, "CURSOR_EXPIRED"),  # swept already
        }
        async with asyncio.timeout(GUARD_S):  # f2's sweeper, once the attempt's lease expired
            while (got := await get(c2, gid)).state != State.INTERRUPTED:
                await asyncio.sleep(0.2)
        assert got.usage_final and got.finish_reason == Reason.INTERRUPTED and got.epoch == 1
        billed = got.usage.output_tokens
        assert billed <= ORPHAN_TOKENS
        with pytest.raises(grpc.aio.AioRpcError) as late:  # the recorded state, not a stream
            await read_rest(resume(c2, gid, seen[-1].sequence))
        assert (late.value.code(), reason_of(late.value)) == (grpc.StatusCode.OUT_OF_RANGE, "CURSOR_EXPIRED")
        assert metadata_of(late.value) == {"generation_id": gid, "state": "INTERRUPTED"}
        assert (await cancel(c2, gid)).state == State.INTERRUPTED  # terminal: nothing to cancel
        usage = await usage_pb2_grpc.UsageStub(c2).GetUsage(
            usage_pb2.GetUsageRequest(window_start=_timestamp(since)), metadata=auth()
        )
    with fleet_store.transaction() as session:
        attempt = session.get(Attempt, (gid, 1))
        watermark = session.get(Watermark, (gid, 1))
        reservation = session.get(Reservation, gid)
        assert attempt is not None and (attempt.terminal_reason, attempt.outcome) == (
            "LEASE_EXPIRED",
            "INTERRUPTED",
        )
        assert watermark is not None and watermark.sealed_at is not None and watermark.output_tokens == billed
        assert reservation is not None and reservation.released_at is not None
    # billed once: the tenant's usage since the test began is this generation's sealed watermark
    assert (usage.generations, usage.output_tokens, usage.interrupted_output_tokens) == (1, billed, billed)
    for worker in whole_fleet.workers:  # the orphaned Triton request was cancelled, its blocks freed
        assert (await wait_until_idle_at(worker.metrics_url, GUARD_S))["llm_worker_kv_blocks:used"] == 0
    # ... before its end: since the test began, the workers computed its prompt, its tokens up to
    # the kill (the worker may have run ahead of the reader), a step or two more, and the liveness
    # canaries' (a few each), fewer than the ORPHAN_TOKENS it would have run to uncancelled
    since_kill = sum(_batched(w.metrics_url) for w in whole_fleet.workers) - sum(computed)
    assert since_kill < ORPHAN_TOKENS, since_kill


async def test_a_worker_killed_mid_stream_moves_new_requests_to_the_other(
    whole_fleet: Fleet, channels: tuple[grpc.aio.Channel, grpc.aio.Channel], fleet_store: Store
) -> None:
    f1, f2 = channels
    call = generate(f1, request(400))  # 26 KV blocks: more than any canary holds
    seen = await read(call, 4)
    gid = seen[0].generation_id
    async with asyncio.timeout(GUARD_S):
        while True:
            busy = [
                w
                for w in whole_fleet.workers
                if scrape_url(w.metrics_url).get("llm_worker_kv_blocks:used", 0) >= 20
            ]
            if busy:
                break
            await asyncio.sleep(0.1)
    [victim] = busy
    victim.kill()
    events = seen + await read_rest(call)
    assert sequences(events) == list(range(1, len(events) + 1))
    finished = events[-1].finished
    assert finished.reason == Reason.INTERRUPTED and not finished.usage_final  # as on one machine
    assert finished.usage.output_tokens == len(output_tokens(events))
    got = await get(f2, gid)
    assert (got.state, got.epoch, got.usage_final) == (State.INTERRUPTED, 1, True)  # sealed, not retried
    # new requests go to the surviving worker at once, through either frontend
    for channel in (f1, f2, f1, f2):
        served = await read_rest(generate(channel, request(4)))
        assert served[-1].finished.reason == Reason.OUTPUT_LIMIT
    async with asyncio.timeout(GUARD_S):  # and once its lease lapsed, it leaves both pools
        for channel in channels:
            while victim.worker_id in await _listed(channel):
                await asyncio.sleep(0.2)


def _batched(url: str) -> float:
    """Tokens a worker's engine has computed, all told (every step's prefill and decode tokens)."""
    return scrape_url(url).get("llm_worker_batched_tokens_total", 0.0)


async def _listed(channel: grpc.aio.Channel) -> set[str]:
    listed = await admin_pb2_grpc.AdminStub(channel).ListWorkers(
        admin_pb2.ListWorkersRequest(), metadata=admin()
    )
    return {w.worker_id for w in listed.workers}


def _timestamp(at: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return stamp
