"""Failover of the replicated control store under load (marked slow; CI runs it).

A real etcd and two PostgreSQL nodes under Patroni (`synchronous_mode: true`, serving/store_ha/),
the platform on their multi-host URL, and three clients sending generations back to back. kill -9
of the primary's postgres: Patroni promotes the synchronous standby, the platform's pool reconnects
there. Then every generation whose `started` a client got is terminal in the store, its billed
usage is the watermark the client was sent, the tenant's bill is the sum of them (nothing counted
twice) and nothing is left RUNNING. The figures go to var/reports/store-failover.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_status import rpc_status
from sqlalchemy import select

from config.loader import parse_config
from control.models import Generation
from frontend.api_errors import error_info
from lifecycle.reads import get_generation
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc, usage_pb2, usage_pb2_grpc
from serving.platform import Platform
from serving.store_ha.cluster import Cluster, ClusterLayout
from tests.e2e.conftest import auth

pytestmark = pytest.mark.slow
KEY = "key-ha"
CLIENTS = 3  # streams of TOKENS each, and a prober of one-token requests
TOKENS = 12
PROBE_S = 0.5
ROUNDS_AFTER = 3  # generations admitted after the promotion before the load stops
GUARD_S = 180.0  # failure guard for every wait on a condition
ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "var" / "reports" / "store-failover.json"
TERMINAL = {pb.Generation.State.COMPLETED, pb.Generation.State.INTERRUPTED, pb.Generation.State.CANCELED}


@dataclass
class Sent:
    request_id: str
    at: float
    generation_id: str = ""
    finished: pb.Finished | None = None
    error: tuple[str, str] | None = None  # (code, reason)
    ended: float = 0.0
    probe: bool = False  # the prober's one-token request


@dataclass
class Load:
    sent: list[Sent] = field(default_factory=list)
    refused: list[float] = field(default_factory=list)  # when a new request was refused UNAVAILABLE
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    streaming: set[str] = field(default_factory=set)  # streams whose `started` came, not yet ended


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def cluster() -> AsyncIterator[Cluster]:
    # under var/: the nodes run as the postgres user, who cannot enter pytest's private tmp folders
    work = ROOT / "var" / f"test-store-ha-{os.getpid()}"
    layout = ClusterLayout(
        work, nodes=2, etcd_port=23795, etcd_peer_port=23796,
        pg_port=5461, rest_port=8461,
    )  # fmt: skip
    c = Cluster(layout)
    try:
        await asyncio.to_thread(c.up)
        assert await asyncio.to_thread(c.up) == layout.store_url()  # idempotent: nothing new started
        yield c
    finally:
        await asyncio.to_thread(c.down, purge=True)
        assert not any(c.postmaster_pid(n) for n in layout.names())  # no process, no port left


def config(url: str) -> object:
    return parse_config(
        {
            "frontend": {
                "metrics_listen": "127.0.0.1:0",
                "attempt_lease_s": 6.0,
                "interactive_queue_wait_s": 30.0,
            },
            "http": {"listen": ""},
            "store": {"url": url, "timeout_s": 2.0, "probe_interval_s": 0.2, "final_usage_wait_s": 30.0},
            "tenants": [{"id": "ha", "api_keys": [KEY]}],
            "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0, "exit_timeout_s": 5},
            "worker": {"name": "ha"},
            "models": [{"alias": "smollm2-135m", "kv_cache_blocks": 256}],
        }
    )


async def generate(stub: generations_pb2_grpc.GenerationsStub, load: Load, s: Sent, tokens: int) -> None:
    sampling = pb.SamplingParams(ignore_eos=True, temperature=0.0)
    prompt = f"Story {s.request_id}:"
    req = pb.GenerateRequest(
        request_id=s.request_id,
        model="smollm2-135m",
        prompt=prompt,
        max_output_tokens=tokens,
        sampling=sampling,
    )
    try:
        async for event in stub.Generate(req, metadata=auth(KEY), timeout=GUARD_S):
            if event.HasField("started"):
                s.generation_id = event.generation_id
                if not s.probe:
                    load.streaming.add(s.request_id)
            elif event.HasField("finished"):
                s.finished = event.finished
    except grpc.aio.AioRpcError as e:
        status = rpc_status.from_call(e)
        info = error_info(status) if status is not None else None
        s.error = (e.code().name, info.reason if info else "")
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (e.code(), e.details())  # never INTERNAL
        if not s.generation_id:
            load.refused.append(time.monotonic())
    s.ended = time.monotonic()
    load.streaming.discard(s.request_id)
    load.sent.append(s)


async def client(stub: generations_pb2_grpc.GenerationsStub, load: Load, i: int) -> None:
    """Streams of TOKENS back to back (after a refusal, a short pause: RetryInfo, shortened)."""
    n = 0
    while not load.stop.is_set():
        n += 1
        s = Sent(f"failover-{i}-{n}", time.monotonic())
        await generate(stub, load, s, TOKENS)
        if s.error is not None:
            await asyncio.sleep(0.2)


async def prober(stub: generations_pb2_grpc.GenerationsStub, load: Load) -> None:
    """A new one-token request every PROBE_S whatever the others do (at most two in flight): when
    the store refuses new work, and for how long."""
    flying: set[asyncio.Task[None]] = set()
    n = 0
    while not load.stop.is_set():
        flying = {t for t in flying if not t.done()}
        if len(flying) < 2:
            n += 1
            s = Sent(f"probe-{n}", time.monotonic(), probe=True)
            flying.add(asyncio.create_task(generate(stub, load, s, 1)))
        await asyncio.sleep(PROBE_S)
    await asyncio.gather(*flying)


async def until(check: object, what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.2)


async def test_the_platform_rides_through_a_primary_killed_under_load(
    cluster: Cluster, tmp_path: Path
) -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    platform = Platform(config(cluster.layout.store_url()), work_dir=tmp_path / "triton")  # type: ignore[arg-type]
    await asyncio.to_thread(platform.start_workers)
    try:
        async with (
            platform.frontend("127.0.0.1:0") as (_, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            stub = generations_pb2_grpc.GenerationsStub(channel)
            load = Load()
            tasks = [asyncio.create_task(client(stub, load, i)) for i in range(CLIENTS)]
            tasks.append(asyncio.create_task(prober(stub, load)))
            done = lambda: sum(s.finished is not None and not s.probe for s in load.sent)  # noqa: E731
            await until(lambda: _true(done() >= CLIENTS), "a first round of streams")
            # the kill lands while every client has a stream running
            await until(lambda: _true(len(load.streaming) == CLIENTS), "every client streaming")
            old = await asyncio.to_thread(cluster.primary)
            assert old is not None
            pid = cluster.postmaster_pid(old.name)
            assert pid is not None
            killed_at = time.monotonic()
            os.kill(pid, signal.SIGKILL)

            async def promoted() -> bool:
                new = await asyncio.to_thread(cluster.primary)
                return new is not None and new.name != old.name

            await until(promoted, "Patroni promoted the standby")
            promoted_at = time.monotonic()
            after = lambda: sum(  # noqa: E731
                s.at > promoted_at and s.finished is not None and not s.probe for s in load.sent
            )
            await until(lambda: _true(after() >= ROUNDS_AFTER), "generations admitted after the failover")
            load.stop.set()
            await asyncio.gather(*tasks)
            await _check_books(platform, stub, channel, load)
            _report(load, killed_at, promoted_at)
    finally:
        await asyncio.to_thread(platform.stop_workers)


async def _true(value: bool) -> bool:
    return value


async def _check_books(
    platform: Platform, stub: generations_pb2_grpc.GenerationsStub, channel: grpc.aio.Channel, load: Load
) -> None:
    started = [s for s in load.sent if s.generation_id]

    async def get(generation_id: str) -> pb.Generation:
        return await stub.GetGeneration(
            pb.GetGenerationRequest(generation_id=generation_id), metadata=auth(KEY)
        )

    async def all_terminal() -> bool:
        states = [(await get(s.generation_id)).state for s in started]
        return all(state in TERMINAL for state in states)

    await until(all_terminal, "every started generation terminal (the sweeper ends lost attempts)")
    for s in started:
        got = await stub.GetGeneration(
            pb.GetGenerationRequest(generation_id=s.generation_id), metadata=auth(KEY)
        )
        assert got.usage_final, s
        if s.finished is not None:  # billed = the watermark the client was sent, exactly
            sent = s.finished.usage
            billed = (got.usage.input_tokens, got.usage.output_tokens, got.usage.cached_input_tokens)
            assert billed == (sent.input_tokens, sent.output_tokens, sent.cached_input_tokens), s
            assert got.state == (
                pb.Generation.State.COMPLETED if s.finished.usage_final else pb.Generation.State.INTERRUPTED
            )
    assert platform.store is not None
    with platform.store.transaction() as session:  # every generation of the tenant, seen or not
        ids = list(session.scalars(select(Generation.id).where(Generation.tenant_id == "ha")))
    records = [get_generation(platform.store, "ha", g) for g in ids]
    assert not [r for r in records if r.state.value in ("RUNNING", "QUEUED")], "stuck after the lease period"
    total = usage_pb2_grpc.UsageStub(channel)
    bill = await total.GetUsage(usage_pb2.GetUsageRequest(), metadata=auth(KEY))
    assert bill.output_tokens == sum(r.usage.billed.output_tokens for r in records)  # nothing twice
    assert bill.input_tokens == sum(r.usage.billed.input_tokens for r in records)


def _report(load: Load, killed_at: float, promoted_at: float) -> None:
    streams = [s for s in load.sent if not s.probe and s.finished is not None]
    # the baseline: streams clear of the failover (ended before the kill, or began after promotion)
    clear = [s.ended - s.at for s in streams if s.ended < killed_at or s.at > promoted_at]
    rode = [s for s in streams if s.at < killed_at < s.ended]
    baseline = statistics.median(clear)
    extra = sorted(max(0.0, (s.ended - s.at) - baseline) for s in rode)
    refused = [t for t in load.refused if t >= killed_at]
    admitted = [s.at for s in load.sent if s.at > killed_at and s.generation_id]
    figures = {
        "generations": len(load.sent),
        "started": sum(bool(s.generation_id) for s in load.sent),
        "interrupted": sum(1 for s in load.sent if s.finished is not None and not s.finished.usage_final),
        "refused_after_kill": len(refused),
        "promotion_s": round(promoted_at - killed_at, 2),
        "unavailability_window_s": round(refused[-1] - refused[0], 2) if refused else 0.0,
        "first_admitted_after_kill_s": round(min(admitted, default=killed_at) - killed_at, 2),
        "baseline_generation_s": round(baseline, 2),
        "baseline_streams": len(clear),
        "streams_before_kill": sum(s.ended < killed_at for s in streams),
        "rode_through": len(extra),
        "p99_extra_latency_s": round(extra[min(len(extra) - 1, int(0.99 * len(extra)))], 2)
        if extra
        else None,
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    print("store failover:", json.dumps(figures))
