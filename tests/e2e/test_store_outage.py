"""The control store goes away under a live platform, on SQLite and on PostgreSQL, and comes back.

What a client sees (docs/operations.md, "When the store is unreachable"): new requests are refused
UNAVAILABLE/STORE_UNAVAILABLE with a RetryInfo within `[store] timeout_s`, never a hang or INTERNAL;
health is NOT_SERVING; a running generation keeps streaming; its `finished` waits for its final usage to
be durable (sealed when the store returns within `final_usage_wait_s`), else ends INTERRUPTED with usage
not final, and the attempt is sealed at that usage once the store is back and its lease has expired.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

import frontend.generations.manager
from config.loader import parse_config
from frontend.api_errors import error_info
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.platform import Platform
from tests.datastore.stores import POSTGRES_URL, postgres_schema
from tests.e2e.conftest import KEY_ALPHA, auth
from tests.e2e.store_gate import PostgresGate, SqliteGate, StoreGate

Reason = pb.Finished.Reason
STORE_TIMEOUT_S = 2.0
GUARD_S = 60.0  # failure guard for every wait on a condition


@dataclasses.dataclass
class Outage:
    platform: Platform
    gate: StoreGate
    stub: generations_pb2_grpc.GenerationsStub
    health: health_pb2_grpc.HealthStub


def outage_config(url: str) -> Any:
    return parse_config(
        {
            "frontend": {
                "metrics_listen": "127.0.0.1:0",
                "interactive_queue_wait_s": 30.0,
                "attempt_lease_s": 12.0,  # longer than an outage here, but the last test's
                "worker_probe_interval_s": 1.0,
            },
            "http": {"listen": "127.0.0.1:0"},
            "store": {"url": url, "timeout_s": STORE_TIMEOUT_S, "probe_interval_s": 0.2},
            "tenants": [{"id": "alpha", "api_keys": [KEY_ALPHA]}],
            "triton": {"grpc_port": 0, "http_port": 0, "metrics_port": 0, "exit_timeout_s": 5},
            "worker": {"name": "outage"},
            "models": [{"alias": "smollm2-135m", "kv_cache_blocks": 256}],
        }
    )


@pytest_asyncio.fixture(loop_scope="session", scope="module", params=["sqlite", "postgresql"])
async def outage(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Outage]:
    work = tmp_path_factory.mktemp(f"outage-{request.param}")
    async with _store(request.param, work) as (url, gate):
        platform = Platform(outage_config(url), work_dir=work / "triton")
        await asyncio.to_thread(platform.start_workers)
        try:
            async with (
                platform.frontend("127.0.0.1:0") as (_, port),
                grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
            ):
                stub = generations_pb2_grpc.GenerationsStub(channel)
                yield Outage(platform, gate, stub, health_pb2_grpc.HealthStub(channel))
        finally:
            gate.close()
            await asyncio.to_thread(platform.stop_workers)


class _store:
    """(store url, gate) for one backend: a SQLite file, or a fresh PostgreSQL schema behind a proxy."""

    def __init__(self, backend: str, work: Path) -> None:
        self.backend, self.work = backend, work
        self._schema: Any = None

    async def __aenter__(self) -> tuple[str, StoreGate]:
        if self.backend == "sqlite":
            path = self.work / "control.sqlite"
            return f"sqlite:///{path}", _LazySqliteGate(path)
        self._schema = postgres_schema()
        schema = self._schema.__enter__()
        gate = PostgresGate(5432)
        base = POSTGRES_URL.replace("127.0.0.1:5432", f"127.0.0.1:{gate.port}")
        return f"{base}?options=-csearch_path%3D{schema}", gate

    async def __aexit__(self, *exc: object) -> None:
        if self._schema is not None:
            self._schema.__exit__(None, None, None)


class _LazySqliteGate:
    """The SQLite gate opens its connection once the platform has created the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._gate: SqliteGate | None = None

    def _get(self) -> SqliteGate:
        if self._gate is None:
            self._gate = SqliteGate(self.path)
        return self._gate

    def down(self) -> None:
        self._get().down()

    def up(self) -> None:
        self._get().up()

    def close(self) -> None:
        if self._gate is not None:
            self._gate.close()


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + GUARD_S
    while not await check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


async def health_is(o: Outage, status: int) -> bool:
    answer = await o.health.Check(health_pb2.HealthCheckRequest(service=""))
    return bool(answer.status == status)


def request(tokens: int = 24, prompt: str = "Count to ten:") -> pb.GenerateRequest:
    return pb.GenerateRequest(
        model="smollm2-135m",
        prompt=prompt,
        max_output_tokens=tokens,
        sampling=pb.SamplingParams(ignore_eos=True, temperature=0.0),
    )


async def refused_while_down(o: Outage) -> None:
    """A new request during the outage: its status, reason and RetryInfo."""
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in o.stub.Generate(request(4), metadata=auth(), timeout=GUARD_S):
            pytest.fail("no event may be streamed before the refusal")
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value.details()
    status = rpc_status.from_call(e.value)
    assert status is not None
    info = error_info(status)
    assert info is not None and info.reason == "STORE_UNAVAILABLE"
    assert any(d.type_url.endswith("google.rpc.RetryInfo") for d in status.details)


async def test_new_requests_are_refused_and_health_fails_while_the_store_is_away(
    outage: Outage, monkeypatch: pytest.MonkeyPatch
) -> None:
    o = outage
    admissions: list[str] = []  # the admission transactions the frontend tried (the real one runs)
    real_admit = frontend.generations.manager.admit

    def counted_admit(*args: Any, **kwargs: Any) -> Any:
        admissions.append("admit")
        return real_admit(*args, **kwargs)

    monkeypatch.setattr(frontend.generations.manager, "admit", counted_admit)
    await until(lambda: health_is(o, health_pb2.HealthCheckResponse.SERVING), "SERVING at first")
    await asyncio.to_thread(o.gate.down)
    try:
        # before the probe noticed, the request itself meets the store's timeout; after, not
        await refused_while_down(o)
        await until(lambda: health_is(o, health_pb2.HealthCheckResponse.NOT_SERVING), "NOT_SERVING")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{o.platform.http_port}") as http:
            answer = await http.get("/healthz")
        assert (answer.status_code, answer.json()) == (503, {"status": "NOT_SERVING"})
        tried = len(admissions)
        await refused_while_down(o)  # the probe's verdict: refused at once, the store not tried
        assert len(admissions) == tried
    finally:
        o.gate.up()
    await until(lambda: health_is(o, health_pb2.HealthCheckResponse.SERVING), "SERVING again")
    events = [e async for e in o.stub.Generate(request(4), metadata=auth(), timeout=GUARD_S)]
    assert events[-1].finished.reason == Reason.OUTPUT_LIMIT and events[-1].finished.usage_final


async def test_a_running_generation_streams_through_and_finishes_sealed_when_the_store_returns(
    outage: Outage,
) -> None:
    o = outage
    await until(lambda: health_is(o, health_pb2.HealthCheckResponse.SERVING), "SERVING at first")
    events: list[pb.GenerationEvent] = []
    down_at = 0
    async for event in o.stub.Generate(request(24), metadata=auth(), timeout=GUARD_S):
        events.append(event)
        if event.HasField("started"):
            await asyncio.to_thread(o.gate.down)
            down_at = len(events)
        elif event.HasField("usage") and event.usage.usage.output_tokens == 24:
            o.gate.up()  # every token came while the store was away; `finished` waits for it
    deltas_while_down = [e for e in events[down_at:] if e.HasField("delta")]
    assert sum(len(e.delta.token_ids) for e in deltas_while_down) == 24
    finished = events[-1].finished
    assert finished.reason == Reason.OUTPUT_LIMIT and finished.usage_final
    assert finished.usage.output_tokens == 24
    got = await o.stub.GetGeneration(
        pb.GetGenerationRequest(generation_id=events[0].generation_id), metadata=auth()
    )
    assert got.state == pb.Generation.State.COMPLETED and got.usage_final
    assert got.usage.output_tokens == 24 and got.usage.input_tokens == finished.usage.input_tokens


async def test_a_store_away_past_the_final_wait_ends_interrupted_and_is_sealed_later(outage: Outage) -> None:
    o = outage
    assert o.platform.manager is not None
    runs = o.platform.manager.runs
    saved = runs.store_settings
    runs.store_settings = dataclasses.replace(saved, final_usage_wait_s=1.0)
    await until(lambda: health_is(o, health_pb2.HealthCheckResponse.SERVING), "SERVING at first")
    events: list[pb.GenerationEvent] = []
    try:
        async for event in o.stub.Generate(request(16), metadata=auth(), timeout=GUARD_S):
            events.append(event)
            if event.HasField("started"):
                await asyncio.to_thread(o.gate.down)
    finally:
        o.gate.up()
        runs.store_settings = saved
    finished = events[-1].finished
    assert finished.reason == Reason.INTERRUPTED and not finished.usage_final
    assert finished.usage.output_tokens == 16
    generation_id = events[0].generation_id

    async def sealed() -> bool:
        try:
            got = await o.stub.GetGeneration(
                pb.GetGenerationRequest(generation_id=generation_id), metadata=auth()
            )
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE  # the store is coming back
            return False
        return bool(got.state == pb.Generation.State.INTERRUPTED)

    await until(sealed, "the sweeper ended the attempt once its lease expired")
    got = await o.stub.GetGeneration(pb.GetGenerationRequest(generation_id=generation_id), metadata=auth())
    # the queued reports were written after the outage: billed exactly what the client was told
    assert got.usage.output_tokens == finished.usage.output_tokens and got.usage_final
