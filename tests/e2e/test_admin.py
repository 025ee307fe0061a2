"""Admin over real gRPC on a platform of two Triton workers: credentials, listing, routing by free
blocks, draining, registering a new version and canary routes between versions."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from config.settings import PlatformConfig
from llm.v1 import admin_pb2, admin_pb2_grpc, generations_pb2_grpc, models_pb2
from llm.v1 import generations_pb2 as pb
from serving.platform import Platform
from tests.e2e.artifacts import variant_artifact
from tests.e2e.conftest import KEY_ALPHA, auth, platform_config
from tests.e2e.test_errors import expect_error

ADMIN_KEY = "key-admin"
MODEL = "smollm2-135m"


def two_workers(store: Path) -> PlatformConfig:
    cfg = platform_config(store)
    model = replace(cfg.models[0], workers=2, kv_cache_blocks=200, max_num_batched_tokens=64)
    return replace(cfg, frontend=replace(cfg.frontend, admin_api_keys=(ADMIN_KEY,)), models=(model,))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def admin_platform(
    tmp_path_factory: pytest.TempPathFactory, artifact_dir: Path
) -> AsyncIterator[tuple[Platform, int]]:
    work = tmp_path_factory.mktemp("admin")
    p = Platform(two_workers(work / "control.sqlite"), work_dir=work / "triton")
    await asyncio.to_thread(p.start_workers)
    try:
        async with p.frontend("127.0.0.1:0") as (_, port):
            yield p, port
    finally:
        await asyncio.to_thread(p.stop_workers)


@pytest_asyncio.fixture(loop_scope="session")
async def ch(admin_platform: tuple[Platform, int]) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{admin_platform[1]}") as channel:
        yield channel


async def rest_of(call: grpc.aio.UnaryStreamCall) -> list[pb.GenerationEvent]:
    """The remaining events of a call already read with read() (the two styles cannot mix)."""
    events = []
    while (event := await call.read()) is not grpc.aio.EOF:
        events.append(event)
    return events


def admin() -> tuple[tuple[str, str], ...]:
    return auth(ADMIN_KEY)


async def test_admin_calls_need_an_admin_key_and_admin_keys_are_not_tenants(ch) -> None:
    stub = admin_pb2_grpc.AdminStub(ch)
    await expect_error(
        lambda: stub.ListWorkers(admin_pb2.ListWorkersRequest()), grpc.StatusCode.UNAUTHENTICATED, None
    )
    await expect_error(
        lambda: stub.ListWorkers(admin_pb2.ListWorkersRequest(), metadata=auth(KEY_ALPHA)),
        grpc.StatusCode.PERMISSION_DENIED,
        "ADMIN_REQUIRED",
    )
    gen = generations_pb2_grpc.GenerationsStub(ch)
    await expect_error(
        lambda: gen.Generate(
            pb.GenerateRequest(model=MODEL, prompt="Hi", max_output_tokens=2), metadata=admin()
        ),
        grpc.StatusCode.PERMISSION_DENIED,
        "NOT_A_TENANT",
    )


async def test_list_workers_and_routing_by_free_blocks(ch, admin_platform) -> None:
    """Two generations of ~119 blocks each cannot share a 200-block worker: each goes to the one
    with more free blocks, so they land on different workers."""
    stub = admin_pb2_grpc.AdminStub(ch)
    listed = (await stub.ListWorkers(admin_pb2.ListWorkersRequest(), metadata=admin())).workers
    version_id = admin_platform[0].registry.resolve(MODEL).version_id
    assert [
        (w.worker_id, list(w.loaded_versions), w.healthy, w.draining, w.free_kv_blocks) for w in listed
    ] == [
        ("local-0", [version_id], True, False, 200),
        ("local-1", [version_id], True, False, 200),
    ]
    gen = generations_pb2_grpc.GenerationsStub(ch)
    req = pb.GenerateRequest(
        model=MODEL, prompt="Count:", max_output_tokens=1900, sampling=pb.SamplingParams(ignore_eos=True)
    )
    calls = [gen.Generate(req, metadata=auth()) for _ in range(2)]
    try:
        for call in calls:
            assert (await call.read()).HasField("started")
        listed = (await stub.ListWorkers(admin_pb2.ListWorkersRequest(), metadata=admin())).workers
        prompt = len(admin_platform[0].registry.resolve(MODEL).tokenizer.encode("Count:"))
        blocks = -(-(prompt + 1900) // 16)
        assert blocks > 100  # two cannot share a worker
        assert [w.free_kv_blocks for w in listed] == [200 - blocks, 200 - blocks]
    finally:
        for call in calls:
            call.cancel()


async def test_drain_sends_new_work_elsewhere_and_lets_active_work_finish(ch, admin_platform) -> None:
    platform = admin_platform[0]
    stub = admin_pb2_grpc.AdminStub(ch)
    gen = generations_pb2_grpc.GenerationsStub(ch)
    async with asyncio.timeout(300):  # the previous test's cancelled generations release their blocks
        while any(w.reserved.get(v, 0) for w in platform.pool.workers.values() for v in w.capacity):
            await asyncio.sleep(0.1)
    # long enough to be running still after the checks below on any machine: it is cancelled after
    req = pb.GenerateRequest(
        model=MODEL, prompt="Count:", max_output_tokens=2000, sampling=pb.SamplingParams(ignore_eos=True)
    )
    active = gen.Generate(req, metadata=auth())
    started = await active.read()
    assert started.HasField("started")
    busy = [w.worker_id for w in platform.pool.workers.values() if w.active]
    assert len(busy) == 1
    drained = await stub.DrainWorker(admin_pb2.DrainWorkerRequest(worker_id=busy[0]), metadata=admin())
    assert drained.draining and drained.worker_id == busy[0]
    # new generations all go to the other worker while the drained one finishes its own
    sent = {w.worker_id: w.dispatched for w in platform.pool.workers.values()}
    others = [
        gen.Generate(pb.GenerateRequest(model=MODEL, prompt="Hi", max_output_tokens=2), metadata=auth())
        for _ in range(3)
    ]
    for call in others:
        assert (await call.read()).HasField("started")
    now_sent = {w.worker_id: w.dispatched for w in platform.pool.workers.values()}
    assert {k: now_sent[k] - sent[k] for k in sent} == {k: 0 if k == busy[0] else 3 for k in sent}
    assert platform.pool.workers[busy[0]].active == 1  # still finishing its own
    deltas = 0
    while deltas < 3:  # and its tokens keep coming from the drained worker
        event = await active.read()
        assert not event.HasField("finished")
        deltas += event.HasField("delta")
    await gen.CancelGeneration(
        pb.CancelGenerationRequest(generation_id=started.generation_id), metadata=auth()
    )
    rest = await rest_of(active)
    assert rest[-1].finished.reason == pb.Finished.Reason.CANCELED
    for call in others:
        assert (await rest_of(call))[-1].HasField("finished")
    await expect_error(
        lambda: stub.DrainWorker(admin_pb2.DrainWorkerRequest(worker_id="nope"), metadata=admin()),
        grpc.StatusCode.NOT_FOUND,
        "WORKER_NOT_FOUND",
    )
    undrained = await stub.UndrainWorker(admin_pb2.UndrainWorkerRequest(worker_id=busy[0]), metadata=admin())
    assert not undrained.draining and not platform.pool.workers[busy[0]].draining
    await expect_error(
        lambda: stub.UndrainWorker(admin_pb2.UndrainWorkerRequest(worker_id="nope"), metadata=admin()),
        grpc.StatusCode.NOT_FOUND,
        "WORKER_NOT_FOUND",
    )


async def test_register_a_version_then_canary_route_to_it(
    ch, admin_platform, artifact_dir: Path, tmp_path: Path
) -> None:
    platform = admin_platform[0]
    stub = admin_pb2_grpc.AdminStub(ch)
    folder, digest = variant_artifact(artifact_dir, tmp_path / "v2")
    register = admin_pb2.RegisterModelVersionRequest(
        name=MODEL, artifact_uri=f"file://{folder}", manifest_sha256=digest
    )
    bad_sum = admin_pb2.RegisterModelVersionRequest(
        name=MODEL, artifact_uri=str(folder), manifest_sha256="0" * 64
    )
    await expect_error(
        lambda: stub.RegisterModelVersion(bad_sum, metadata=admin()),
        grpc.StatusCode.FAILED_PRECONDITION,
        "CHECKSUM_MISMATCH",
    )
    wrong_name = admin_pb2.RegisterModelVersionRequest(
        name="other", artifact_uri=str(folder), manifest_sha256=digest
    )
    await expect_error(
        lambda: stub.RegisterModelVersion(wrong_name, metadata=admin()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "NAME_MISMATCH",
    )
    tampered, tampered_digest = variant_artifact(artifact_dir, tmp_path / "tampered")
    (tampered / "chat_template.jinja").write_text("changed after the manifest was written")
    await expect_error(
        lambda: stub.RegisterModelVersion(
            admin_pb2.RegisterModelVersionRequest(
                name=MODEL, artifact_uri=str(tampered), manifest_sha256=tampered_digest
            ),
            metadata=admin(),
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ARTIFACT_INVALID",
    )

    v2 = await stub.RegisterModelVersion(register, metadata=admin())
    assert v2.ready and v2.ready_workers == 2
    again = await stub.RegisterModelVersion(register, metadata=admin())  # idempotent
    assert again.id == v2.id
    v1 = platform.registry.resolve(MODEL).version_id
    assert v2.id != v1 and v2.id in platform.registry.versions

    gen = generations_pb2_grpc.GenerationsStub(ch)
    # a generation pinned to v1 keeps it when the route moves
    long_req = pb.GenerateRequest(
        model=MODEL,
        prompt="Count:",
        max_output_tokens=24,
        request_id="pinned",
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    pinned = gen.Generate(long_req, metadata=auth())
    first = await pinned.read()
    assert first.started.model_version == v1
    route = models_pb2.AliasRoute(
        alias=MODEL,
        targets=[
            models_pb2.WeightedVersion(version_id=v1, weight=50),
            models_pb2.WeightedVersion(version_id=v2.id, weight=50),
        ],
    )
    got = await stub.SetAliasRoute(admin_pb2.SetAliasRouteRequest(route=route), metadata=admin())
    assert sorted((t.version_id, t.weight) for t in got.targets) == sorted([(v1, 50), (v2.id, 50)])
    rest = await rest_of(pinned)
    assert rest[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT

    pins = {}
    for i in range(12):
        req = pb.GenerateRequest(model=MODEL, prompt="Hi", max_output_tokens=1, request_id=f"canary-{i}")
        events = [e async for e in gen.Generate(req, metadata=auth())]
        pins[f"canary-{i}"] = events[0].started.model_version
    assert set(pins.values()) == {v1, v2.id}  # both versions take a share
    retry = [
        e
        async for e in gen.Generate(
            pb.GenerateRequest(model=MODEL, prompt="Hi", max_output_tokens=1, request_id="canary-3"),
            metadata=auth(),
        )
    ]
    assert retry[0].started.model_version == pins["canary-3"]  # a retry pins the same version

    unknown = models_pb2.AliasRoute(
        alias=MODEL, targets=[models_pb2.WeightedVersion(version_id=f"{MODEL}@nope", weight=1)]
    )
    await expect_error(
        lambda: stub.SetAliasRoute(admin_pb2.SetAliasRouteRequest(route=unknown), metadata=admin()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNKNOWN_MODEL",
    )
    zero = models_pb2.AliasRoute(alias=MODEL, targets=[models_pb2.WeightedVersion(version_id=v1, weight=0)])
    await expect_error(
        lambda: stub.SetAliasRoute(admin_pb2.SetAliasRouteRequest(route=zero), metadata=admin()),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ROUTE",
    )


async def test_a_dead_worker_is_routed_around_then_restarted(ch, admin_platform) -> None:
    platform = admin_platform[0]
    stub = admin_pb2_grpc.AdminStub(ch)
    gen = generations_pb2_grpc.GenerationsStub(ch)
    victim = next(w for w in platform.workers if w.worker_id == "local-1")
    assert victim.server.process is not None
    os.kill(victim.server.process.pid, signal.SIGKILL)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120  # generous: only a supervisor that never notices fails
    while platform.pool.workers["local-1"].healthy:  # the supervisor notices within its interval
        assert loop.time() < deadline, "the dead worker was never marked down"
        await asyncio.sleep(0.1)
    # new generations go to the live worker meanwhile
    for i in range(3):
        events = [
            e
            async for e in gen.Generate(
                pb.GenerateRequest(model=MODEL, prompt=f"Hi {i}", max_output_tokens=2),
                metadata=auth(),
                timeout=60,
            )
        ]
        assert events[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
    deadline = loop.time() + 120
    while not platform.pool.workers["local-1"].healthy:
        assert loop.time() < deadline, "the dead worker was not restarted"
        await asyncio.sleep(0.2)
    listed = {
        w.worker_id: w
        for w in (await stub.ListWorkers(admin_pb2.ListWorkersRequest(), metadata=admin())).workers
    }
    assert listed["local-1"].healthy and not listed["local-1"].draining
    assert len(listed["local-1"].loaded_versions) == len(platform.registry.versions)  # v2 reloaded too
