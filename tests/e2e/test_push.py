"""Model repository pushes end to end, over real gRPC to a platform with one Triton worker: llmctl
build -> push -> canary 50/50 -> promote -> rollback -> retire (refused while routed; unloaded from
Triton once its last generation ended), every refusal a push can meet (each leaving the repository
as it was), an interrupted push restarted, and a worker-side fetch that refuses tampered files.

The pushed versions are tiny random-weight Llamas (tests/tiny_model.py) beside the real model, so
pushing and loading them takes about a second."""

from __future__ import annotations

import asyncio
import getpass
import hashlib
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from artifacts.manifest import ArtifactIntegrityError, read_manifest
from llm.v1 import admin_pb2, admin_pb2_grpc, generations_pb2_grpc, models_pb2, models_pb2_grpc
from llm.v1 import generations_pb2 as pb
from llmctl.cli import main as llmctl
from llmctl.rollout import push_messages
from serving.artifact_fetch import fetch_version
from serving.platform import Platform
from tests.e2e.conftest import KEY_ALPHA, auth, platform_config
from tests.e2e.test_converse import read_acking
from tests.e2e.test_errors import expect_error
from tests.tiny_model import tiny_artifact

ADMIN_KEY = "key-admin-push"
ALIAS = "smollm2-135m"
LIMIT = 24 << 20  # [repository] max_push_bytes: a tiny artifact is ~16 MiB


@pytest.fixture(scope="module")
def tiny(artifact_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Path]]:
    """Built artifacts of two tiny models (seeds 0 and 1): two versions of the model "tiny"."""
    root = tmp_path_factory.mktemp("tiny")
    yield {s: tiny_artifact(artifact_dir, root, s) for s in (0, 1)}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pushed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Platform, int, Path]]:
    work = tmp_path_factory.mktemp("push")
    cfg = platform_config(work / "control.sqlite")
    cfg = replace(
        cfg,
        frontend=replace(
            cfg.frontend, admin_api_keys=(ADMIN_KEY,), catalog_refresh_s=0.2, slow_consumer_timeout_s=600.0
        ),
        repository=replace(cfg.repository, path=str(work / "repo"), max_push_bytes=LIMIT),
        models=(replace(cfg.models[0], kv_cache_blocks=128),),
    )
    p = Platform(cfg, work_dir=work / "triton")
    await asyncio.to_thread(p.start_workers)
    try:
        async with p.frontend("127.0.0.1:0") as (_, port):
            yield p, port, work / "repo"
    finally:
        await asyncio.to_thread(p.stop_workers)


@pytest_asyncio.fixture(loop_scope="session")
async def ch(pushed) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{pushed[1]}") as channel:
        yield channel


def admin() -> tuple[tuple[str, str], ...]:
    return (*auth(ADMIN_KEY), ("x-operator", "tester"))


def tree(root: Path) -> list[tuple[str, int]]:
    """Every file under `root` with its size (the repository's state)."""
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def messages(folder: Path, alias: str = "") -> list[admin_pb2.PushModelVersionRequest]:
    return list(push_messages(folder, alias, 0, False))


async def push(ch: grpc.aio.Channel, msgs: list[admin_pb2.PushModelVersionRequest]):
    return await admin_pb2_grpc.AdminStub(ch).PushModelVersion(iter(msgs), metadata=admin())


async def refused(ch, repo: Path, msgs, code: grpc.StatusCode, reason: str) -> None:
    """The push is refused with `reason` and the repository (and the catalog) are as they were."""
    before = tree(repo) if repo.exists() else []
    models = models_pb2_grpc.ModelsStub(ch)
    listed = await models.ListModels(models_pb2.ListModelsRequest(), metadata=auth())
    await expect_error(lambda: push(ch, msgs), code, reason)
    assert (tree(repo) if repo.exists() else []) == before
    assert await models.ListModels(models_pb2.ListModelsRequest(), metadata=auth()) == listed


def manifest_message(manifest: dict[str, object]) -> admin_pb2.PushModelVersionRequest:
    return admin_pb2.PushModelVersionRequest(manifest=json.dumps(manifest).encode())


async def test_every_refused_push_leaves_the_repository_unchanged(ch, pushed, tiny) -> None:
    repo, art = pushed[2], tiny[0]
    good = messages(art)
    manifest = json.loads(good[0].manifest)
    chunks = good[1:]
    big = next(i for i, m in enumerate(chunks) if m.chunk.file == "model.safetensors" and m.chunk.offset > 0)

    corrupted = [admin_pb2.PushModelVersionRequest() for _ in chunks]
    for c, m in zip(corrupted, chunks, strict=True):
        c.CopyFrom(m)
    corrupted[big].chunk.data = bytes([corrupted[big].chunk.data[0] ^ 1]) + corrupted[big].chunk.data[1:]
    await refused(ch, repo, [good[0], *corrupted], grpc.StatusCode.INVALID_ARGUMENT, "CHECKSUM_MISMATCH")
    await refused(
        ch, repo, good[: big + 1], grpc.StatusCode.INVALID_ARGUMENT, "INCOMPLETE_UPLOAD"
    )  # truncated
    oversize = {**manifest, "sizes": {**manifest["sizes"], "model.safetensors": LIMIT}}
    await refused(
        ch, repo, [manifest_message(oversize)], grpc.StatusCode.RESOURCE_EXHAUSTED, "PUSH_TOO_LARGE"
    )
    wrong_version = {**manifest, "version": "0123456789abcdef"}
    await refused(
        ch,
        repo,
        [manifest_message(wrong_version)],
        grpc.StatusCode.INVALID_ARGUMENT,
        "MANIFEST_INVALID",
    )
    files = dict(manifest["files"])
    del files["tokenizer.json"]
    missing = {**manifest, "files": files}
    await refused(ch, repo, [manifest_message(missing)], grpc.StatusCode.INVALID_ARGUMENT, "MANIFEST_INVALID")
    wrong_key = {**manifest, "compatibility_key": "0" * 32}
    await refused(
        ch, repo, [manifest_message(wrong_key), *chunks], grpc.StatusCode.INVALID_ARGUMENT, "MANIFEST_INVALID"
    )
    await refused(
        ch,
        repo,
        [admin_pb2.PushModelVersionRequest(manifest=b"{not json")],
        grpc.StatusCode.INVALID_ARGUMENT,
        "MANIFEST_INVALID",
    )
    await refused(ch, repo, chunks[:2], grpc.StatusCode.INVALID_ARGUMENT, "MANIFEST_FIRST")
    await refused(ch, repo, [good[0], chunks[big]], grpc.StatusCode.INVALID_ARGUMENT, "OUT_OF_ORDER")
    bad_alias = messages(art, alias="has@at")
    await refused(ch, repo, bad_alias, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ALIAS")
    # a tenant key is no admin key. The refusal comes before any message is read, so only the
    # manifest is sent: a client still writing megabytes of chunks when the call ends may see its
    # own write fail (INTERNAL, "Failed execute_batch") instead of the status, as gRPC clients do
    await expect_error(
        lambda: admin_pb2_grpc.AdminStub(ch).PushModelVersion(iter(good[:1]), metadata=auth(KEY_ALPHA)),
        grpc.StatusCode.PERMISSION_DENIED,
        "ADMIN_REQUIRED",
    )
    assert not (repo / ".staging").exists() or not any((repo / ".staging").iterdir())

    # the same version pushed twice: the second is a no-op; other content under its id: ALREADY_EXISTS
    first = await push(ch, good)
    assert (first.already_present, first.version.status, first.version.ready_workers) == (False, "READY", 1)
    assert first.version.id == read_manifest(art).version_id
    again = await push(ch, good)
    assert again.already_present and again.version.id == first.version.id
    other = {**manifest, "context_length": 1024}  # same files, another artifact under the same id
    await refused(ch, repo, [manifest_message(other)], grpc.StatusCode.ALREADY_EXISTS, "VERSION_EXISTS")


async def test_an_interrupted_push_leaves_nothing_and_can_restart(ch, pushed, tiny) -> None:
    repo, art = pushed[2], tiny[1]
    before = tree(repo)
    msgs = messages(art)
    release = asyncio.Event()

    async def stalled() -> AsyncIterator[admin_pb2.PushModelVersionRequest]:
        for m in msgs[:4]:
            yield m
        await release.wait()  # never set: the client gives up here

    call = admin_pb2_grpc.AdminStub(ch).PushModelVersion(stalled(), metadata=admin())
    staging = repo / ".staging"
    while not (staging.exists() and any(staging.iterdir())):  # the server is staging it
        await asyncio.sleep(0.05)
    call.cancel()
    while any(staging.iterdir()):  # the cancelled call removes its staging folder
        await asyncio.sleep(0.05)
    assert tree(repo) == before
    done = await push(ch, msgs)  # restarted from the beginning
    assert not done.already_present and done.version.ready


async def test_build_push_canary_promote_rollback_retire(ch, pushed, tiny, capsys) -> None:
    platform, port, repo = pushed
    v1 = platform.registry.resolve(ALIAS).version_id
    target = ["--target", f"127.0.0.1:{port}", "--admin-key", ADMIN_KEY]
    capsys.readouterr()
    # llmctl blocks: it runs on a thread beside the server's event loop
    assert (
        await asyncio.to_thread(
            llmctl, [*target, "push", str(tiny[0]), "--alias", ALIAS, "--canary", "50", "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    v2 = out["version"]["id"]
    assert out["alreadyPresent"] is True  # the refusal test pushed it already
    assert sorted((t["versionId"], t["weight"]) for t in out["route"]["targets"]) == sorted(
        [(v1, 50), (v2, 50)]
    )

    listed = await models_pb2_grpc.ModelsStub(ch).ListModels(models_pb2.ListModelsRequest(), metadata=auth())
    shown = {v.id: (v.quantization, v.status, v.ready) for v in listed.versions}
    assert shown[v1] == ("none", "READY", True) and shown[v2] == ("none", "READY", True)
    sizes = {v.id: v.size_bytes for v in listed.versions}
    assert sizes[v2] == sum((read_manifest(tiny[0]).sizes or {}).values()) and sizes[v1] > 500 << 20

    gen = generations_pb2_grpc.GenerationsStub(ch)

    async def pin(request_id: str, model: str = ALIAS) -> str:
        req = pb.GenerateRequest(model=model, prompt="Hi", max_output_tokens=1, request_id=request_id)
        events = [e async for e in gen.Generate(req, metadata=auth())]
        return events[0].started.model_version

    pins = {f"c-{i}": await pin(f"c-{i}") for i in range(12)}
    assert set(pins.values()) == {v1, v2}  # both versions serve
    assert await pin("c-5") == pins["c-5"]  # a retry pins the same version

    assert await asyncio.to_thread(llmctl, [*target, "promote", ALIAS]) == 0  # the canary: v2
    assert capsys.readouterr().out.strip() == f"{ALIAS} -> {v2} (100)"
    assert {await pin(f"p-{i}") for i in range(4)} == {v2}
    assert await asyncio.to_thread(llmctl, [*target, "rollback", ALIAS]) == 0
    assert capsys.readouterr().out.strip() == f"{ALIAS} -> " + ", ".join(
        f"{v} (50)" for v in sorted([v1, v2])
    )

    # retire: refused while routed, the route unchanged
    assert await asyncio.to_thread(llmctl, [*target, "retire", v2]) == 1
    assert "FAILED_PRECONDITION (VERSION_ROUTED)" in capsys.readouterr().err
    assert sorted(platform.registry.routes[ALIAS]) == sorted([v1, v2])
    admin_stub = admin_pb2_grpc.AdminStub(ch)
    route = models_pb2.AliasRoute(alias=ALIAS, targets=[models_pb2.WeightedVersion(version_id=v1, weight=1)])
    await admin_stub.SetAliasRoute(admin_pb2.SetAliasRouteRequest(route=route), metadata=admin())

    # a generation pinned to v2 holds it: Converse sends 8 events past the last ack, so it cannot end unacked
    converse = gen.Converse(metadata=auth())
    start = pb.GenerateRequest(
        model=v2,
        prompt="Count:",
        max_output_tokens=200,
        request_id="held",
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    await converse.write(pb.ConverseRequest(start=start))
    first = await converse.read()
    assert first.started.model_version == v2
    retiring = await admin_stub.RetireVersion(
        admin_pb2.RetireVersionRequest(version_id=v2, delete_files=True), metadata=admin()
    )
    assert retiring.status == "DRAINING"
    await expect_error(
        lambda: gen.Generate(pb.GenerateRequest(model=v2, prompt="Hi", max_output_tokens=1), metadata=auth()),
        grpc.StatusCode.FAILED_PRECONDITION,
        "VERSION_NOT_SERVABLE",
    )
    triton = platform.workers[0].server
    name = platform.registry.versions[v2].triton_model_name
    assert (await asyncio.to_thread(triton.repository_index))[name] == "READY"  # its generation runs on
    last = (await read_acking(converse))[first.generation_id][-1]  # consumed and acked to its end
    assert last.finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
    await converse.done_writing()
    assert platform.rollout is not None
    # then it is unloaded (generous: only a retirement that never completes fails)
    await asyncio.wait_for(platform.rollout.wait_retired(v2), timeout=180)
    listed = await models_pb2_grpc.ModelsStub(ch).ListModels(models_pb2.ListModelsRequest(), metadata=auth())
    assert {v.id: v.status for v in listed.versions}[v2] == "RETIRED"
    assert not (repo / "tiny" / v2.partition("@")[2]).exists()  # delete_files
    assert (await asyncio.to_thread(triton.repository_index))[name] == "UNAVAILABLE"
    health = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
    assert health.status == health_pb2.HealthCheckResponse.SERVING  # a retired version needs no worker

    changes = (
        await admin_stub.ListModelChanges(admin_pb2.ListModelChangesRequest(), metadata=admin())
    ).changes
    actions = [(c.action, c.alias, c.version_id) for c in reversed(changes)]
    assert actions[-6:] == [
        ("CANARY", ALIAS, ""),
        ("PROMOTE", ALIAS, ""),
        ("ROLLBACK", ALIAS, ""),
        ("SET_ROUTE", ALIAS, ""),
        ("RETIRE", "", v2),
        ("RETIRED", "", v2),
    ]
    assert ("PUSH", "", v2) in actions and actions[0] == ("SET_ROUTE", ALIAS, "")  # the config's seed
    assert [c.actor for c in changes if c.action == "SET_ROUTE"][-1] == "config"
    key = hashlib.sha256(ADMIN_KEY.encode()).hexdigest()[:8]
    by = {c.action: c.actor for c in changes}  # llmctl sends the user at the keyboard
    assert (by["PROMOTE"], by["RETIRE"]) == (f"{getpass.getuser()} (key {key})", f"tester (key {key})")
    assert all(c.at_unix_ms > 0 for c in changes)


async def test_a_worker_fetches_a_version_it_lacks_and_refuses_tampered_files(
    ch, pushed, tiny, tmp_path: Path
) -> None:
    _, port, repo = pushed
    version_id = read_manifest(tiny[1]).version_id  # pushed by the interrupted-push test
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        # a download broken off midway resumes from what is on disk
        partial = tmp_path / "w1" / ".fetch" / version_id.replace("@", "-")
        partial.mkdir(parents=True)
        source = repo / "tiny" / version_id.partition("@")[2]
        (partial / "model.safetensors").write_bytes((source / "model.safetensors").read_bytes()[:1000])
        folder = await asyncio.to_thread(fetch_version, channel, version_id, tmp_path / "w1", admin())
        assert tree(folder) == tree(source)
        assert not partial.exists()
        # a tampered repository file: refused, nothing in place to load
        data = bytearray((source / "tokenizer.json").read_bytes())
        data[100] ^= 1
        (source / "tokenizer.json").write_bytes(bytes(data))
        with pytest.raises(ArtifactIntegrityError, match=r"tokenizer\.json does not match"):
            await asyncio.to_thread(fetch_version, channel, version_id, tmp_path / "w2", admin())
        assert not (tmp_path / "w2" / "tiny").exists()
        shutil.rmtree(tmp_path / "w2")
