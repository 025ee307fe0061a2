"""The control store is the authority (issue 11): what Admin changes survives the platform being
stopped and started again on the same store (what `make serve` does), and two frontends on one
PostgreSQL see one route change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import grpc

from config.settings import PlatformConfig
from llm.v1 import admin_pb2, admin_pb2_grpc, generations_pb2_grpc, models_pb2, models_pb2_grpc
from llm.v1 import generations_pb2 as pb
from serving.platform import Platform
from tests.datastore.stores import POSTGRES_URL, postgres_schema
from tests.e2e.artifacts import variant_artifact
from tests.e2e.conftest import auth, platform_config
from tests.e2e.test_admin import ADMIN_KEY, MODEL, admin

CANARY = "smollm2-canary"


def one_worker(store_url: str) -> PlatformConfig:
    cfg = platform_config()
    model = replace(cfg.models[0], kv_cache_blocks=200, max_num_batched_tokens=64)
    return replace(
        cfg,
        frontend=replace(cfg.frontend, admin_api_keys=(ADMIN_KEY,), catalog_refresh_s=0.2),
        store=replace(cfg.store, url=store_url),
        models=(model,),
    )


@asynccontextmanager
async def running(cfg: PlatformConfig, work: Path) -> AsyncIterator[tuple[Platform, grpc.aio.Channel]]:
    """The platform started as `make serve` starts it, and a channel to its frontend."""
    platform = Platform(cfg, work_dir=work)
    await asyncio.to_thread(platform.start_workers)
    try:
        async with (
            platform.frontend("127.0.0.1:0") as (_, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
        ):
            yield platform, channel
    finally:
        await asyncio.to_thread(platform.stop_workers)


async def catalog(channel: grpc.aio.Channel) -> tuple[dict[str, bool], dict[str, dict[str, int]]]:
    """(version id -> ready, alias -> {version id: weight}) as ListModels reports them."""
    listed = await models_pb2_grpc.ModelsStub(channel).ListModels(
        models_pb2.ListModelsRequest(), metadata=auth()
    )
    versions = {v.id: v.ready for v in listed.versions}
    return versions, {a.alias: {t.version_id: t.weight for t in a.targets} for a in listed.aliases}


async def workers(channel: grpc.aio.Channel) -> dict[str, bool]:
    """worker id -> draining."""
    stub = admin_pb2_grpc.AdminStub(channel)
    listed = await stub.ListWorkers(admin_pb2.ListWorkersRequest(), metadata=admin())
    return {w.worker_id: w.draining for w in listed.workers}


def route(alias: str, **weights: int) -> admin_pb2.SetAliasRouteRequest:
    targets = [models_pb2.WeightedVersion(version_id=v, weight=w) for v, w in weights.items()]
    return admin_pb2.SetAliasRouteRequest(route=models_pb2.AliasRoute(alias=alias, targets=targets))


async def test_admin_routes_versions_and_drains_survive_restarts(artifact_dir: Path, tmp_path: Path) -> None:
    cfg = one_worker(f"sqlite:///{tmp_path / 'control.sqlite'}")
    folder, digest = variant_artifact(artifact_dir, tmp_path / "v2")
    async with running(cfg, tmp_path / "run1") as (platform, channel):
        stub = admin_pb2_grpc.AdminStub(channel)
        v1 = platform.registry.resolve(MODEL).version_id
        register = admin_pb2.RegisterModelVersionRequest(
            name=MODEL, artifact_uri=str(folder), manifest_sha256=digest
        )
        v2 = (await stub.RegisterModelVersion(register, metadata=admin())).id
        await stub.SetAliasRoute(route(MODEL, **{v1: 90, v2: 10}), metadata=admin())
        await stub.SetAliasRoute(route(CANARY, **{v2: 1}), metadata=admin())
        await stub.DrainWorker(admin_pb2.DrainWorkerRequest(worker_id="local-0"), metadata=admin())
        before = await catalog(channel)

    async with running(cfg, tmp_path / "run2") as (platform, channel):
        versions, routes = await catalog(channel)
        assert (versions, routes) == before
        assert versions == {v1: False, v2: False}  # both loaded again, on a worker still drained
        assert routes == {MODEL: {v1: 90, v2: 10}, CANARY: {v2: 1}}  # not the config's 100% route
        assert await workers(channel) == {"local-0": True}
        undrained = await admin_pb2_grpc.AdminStub(channel).UndrainWorker(
            admin_pb2.UndrainWorkerRequest(worker_id="local-0"), metadata=admin()
        )
        assert not undrained.draining
        assert (await catalog(channel))[0] == {v1: True, v2: True}
        gen = generations_pb2_grpc.GenerationsStub(channel)
        req = pb.GenerateRequest(model=CANARY, prompt="Hi", max_output_tokens=2)
        events = [e async for e in gen.Generate(req, metadata=auth())]
        assert events[0].started.model_version == v2
        assert events[-1].finished.reason == pb.Finished.Reason.OUTPUT_LIMIT

    async with running(cfg, tmp_path / "run3") as (_, channel):
        assert await workers(channel) == {"local-0": False}  # undrained stays undrained
        assert (await catalog(channel))[1] == {MODEL: {v1: 90, v2: 10}, CANARY: {v2: 1}}


async def test_two_frontends_on_one_postgresql_see_one_route_change(tmp_path: Path) -> None:
    with postgres_schema() as schema:
        cfg = one_worker(f"{POSTGRES_URL}?options=-csearch_path%3D{schema}")
        async with (
            running(cfg, tmp_path / "a") as (platform, a),
            running(cfg, tmp_path / "b") as (_, b),
        ):
            v1 = platform.registry.resolve(MODEL).version_id
            assert CANARY not in (await catalog(b))[1]
            await admin_pb2_grpc.AdminStub(a).SetAliasRoute(route(CANARY, **{v1: 3}), metadata=admin())
            deadline = asyncio.get_running_loop().time() + 120  # generous: a hang, not a speed, fails
            while CANARY not in (await catalog(b))[1]:  # B reloads once it sees the new revision
                assert asyncio.get_running_loop().time() < deadline, "frontend B never saw the route"
                await asyncio.sleep(0.1)
            assert (await catalog(b))[1][CANARY] == {v1: 3}
            gen = generations_pb2_grpc.GenerationsStub(b)
            req = pb.GenerateRequest(model=CANARY, prompt="Hi", max_output_tokens=1)
            events = [e async for e in gen.Generate(req, metadata=auth())]
            assert events[0].started.model_version == v1
