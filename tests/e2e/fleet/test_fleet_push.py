"""A version pushed to one frontend of the fleet reaches every worker host and the other frontend
(each fetches it into its own repository, verified, from the first: [fleet] repository_target),
serves through either frontend, and its retirement unloads it from every worker host's Triton once
its last generation ended (issue 15, points 3 and 4, in the fleet)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import pytest
import tritonclient.grpc as triton_grpc

from artifacts.manifest import read_manifest
from llm.v1 import admin_pb2, admin_pb2_grpc, models_pb2, models_pb2_grpc
from llm.v1 import generations_pb2 as pb
from llmctl.rollout import push_messages
from serving.triton import GRPC_ACCESS_HEADER
from tests.e2e.conftest import auth
from tests.e2e.fleet.client import TIMEOUT_S, generate, read_rest, reason_of, stub
from tests.e2e.fleet.harness import WORKER_KEY, Fleet, admin
from tests.e2e.test_converse import read_acking
from tests.e2e.test_errors import expect_error
from tests.tiny_model import tiny_artifact

pytestmark = pytest.mark.fleet
Channels = tuple[grpc.aio.Channel, grpc.aio.Channel]
HANG_S = 300.0  # hang guard of each wait: a busy machine takes longer, it never fails for it


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    async with asyncio.timeout(HANG_S):
        while not await condition():
            await asyncio.sleep(0.2)


async def loaded_on(channel: grpc.aio.Channel) -> dict[str, set[str]]:
    """worker id -> the versions its registration advertises, as a frontend lists them."""
    listed = await admin_pb2_grpc.AdminStub(channel).ListWorkers(
        admin_pb2.ListWorkersRequest(), metadata=admin()
    )
    return {w.worker_id: set(w.loaded_versions) for w in listed.workers}


def triton_state(address: str, model: str) -> str:
    """The model's state in a worker host's Triton repository index (its access key)."""
    client = triton_grpc.InferenceServerClient(address)
    try:
        index = client.get_model_repository_index(headers={GRPC_ACCESS_HEADER: WORKER_KEY}, as_json=True)
    finally:
        client.close()
    return {m["name"]: m.get("state", "") for m in index.get("models", [])}.get(model, "")


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


async def test_a_version_pushed_to_one_frontend_serves_fleet_wide_and_retires_everywhere(
    whole_fleet: Fleet, channels: Channels, artifact_dir: Path, tmp_path: Path
) -> None:
    f1, f2 = channels
    folder = tiny_artifact(artifact_dir, tmp_path, seed=7)
    version_id = read_manifest(folder).version_id
    name, _, version = version_id.partition("@")
    pushed = await admin_pb2_grpc.AdminStub(f1).PushModelVersion(
        iter(list(push_messages(folder, "", 0, False))), metadata=admin(), timeout=HANG_S
    )
    # it answers once a worker host loaded it and recorded it READY
    assert (pushed.version.id, pushed.version.status) == (version_id, "READY")

    async def everywhere() -> bool:
        return all(version_id in v for v in (await loaded_on(f1)).values())

    await until(everywhere, "every worker host loads the pushed version")
    pushed_files = files(whole_fleet.frontends[0].repository / name / version)
    for role in whole_fleet.workers:  # fetched into each host's own repository, byte for byte
        assert files(role.repository / name / version) == pushed_files

    # both frontends serve it: the second adds it to its registry from its own fetched copy
    async def serves(channel: grpc.aio.Channel) -> bool:
        req = pb.GenerateRequest(model=version_id, prompt="Hi", max_output_tokens=2)
        try:
            events = await read_rest(stub(channel).Generate(req, metadata=auth(), timeout=TIMEOUT_S))
        except grpc.aio.AioRpcError as e:
            assert reason_of(e) == "UNKNOWN_MODEL", e  # not yet in that frontend's registry
            return False
        assert events[0].started.model_version == version_id
        return events[-1].HasField("finished")

    for channel in (f1, f2):
        await until(functools.partial(serves, channel), "the frontend serves the pushed version")
    assert files(whole_fleet.frontends[1].repository / name / version) == pushed_files

    # a generation pinned to it holds the retirement. It cannot end before the checks below: with
    # nothing acked, its run pauses once its event log holds stream_max_events (512) of its 1,000
    # tokens' events, until read_acking acks them (the fleet's slow-consumer timeout is 600 s)
    converse = stub(f2).Converse(metadata=auth())
    start = pb.GenerateRequest(
        model=version_id,
        prompt="Count:",
        max_output_tokens=1000,
        request_id="fleet-held",
        sampling=pb.SamplingParams(ignore_eos=True),
    )
    await converse.write(pb.ConverseRequest(start=start))
    first = await converse.read()
    assert first.started.model_version == version_id
    retiring = await admin_pb2_grpc.AdminStub(f1).RetireVersion(
        admin_pb2.RetireVersionRequest(version_id=version_id), metadata=admin()
    )
    assert retiring.status == "DRAINING"
    for channel in (f1, f2):  # f2's catalog may not have seen it yet: admission refuses it in the store
        await expect_error(
            lambda channel=channel: generate(
                channel, pb.GenerateRequest(model=version_id, prompt="Hi", max_output_tokens=1)
            ),
            grpc.StatusCode.FAILED_PRECONDITION,
            "VERSION_NOT_SERVABLE",
        )
    triton_name = version_id.replace("@", "--", 1)
    held = await asyncio.to_thread(triton_state, whole_fleet.workers[0].address, triton_name)
    assert held == "READY" and await everywhere()  # its generation runs on
    last = (await read_acking(converse))[first.generation_id][-1]  # consumed and acked to its end
    assert last.finished.reason == pb.Finished.Reason.OUTPUT_LIMIT
    await converse.done_writing()

    async def retired() -> bool:
        listed = await models_pb2_grpc.ModelsStub(f1).ListModels(
            models_pb2.ListModelsRequest(), metadata=auth()
        )
        return {v.id: v.status for v in listed.versions}.get(version_id) == "RETIRED"

    await until(retired, "the retirement completes")
    # RETIRED is recorded only after no worker host advertises it, each having unloaded it from Triton
    assert not any(version_id in v for v in (await loaded_on(f1)).values())
    for role in whole_fleet.workers:
        assert await asyncio.to_thread(triton_state, role.address, triton_name) == "UNAVAILABLE"
    for frontend in whole_fleet.frontends:  # a retired version is no reason to report NOT_SERVING
        await asyncio.to_thread(whole_fleet.wait_ready, frontend)
