"""A worker's Python-backend stub that hangs (SIGSTOP) or dies (SIGKILL) mid-stream: the
generation ends INTERRUPTED with its usage sealed, health turns NOT_SERVING while the supervisor
restarts the worker and SERVING after, and a new request succeeds with no one stepping in. A
worker is only the server this launch started, and a Triton port in use is a start-up error."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from config.settings import PlatformConfig
from llm.v1 import generations_pb2 as pb
from llm.v1 import generations_pb2_grpc
from serving.__main__ import main
from serving.platform import Platform
from serving.triton import TritonServer
from serving.triton_host import TritonError
from tests.e2e.conftest import auth, platform_config
from tests.e2e.test_restart import running

Reason = pb.Finished.Reason
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
BOUND_S = 180.0  # generous: only a hang fails it


def liveness_config(store: Path) -> PlatformConfig:
    """Small liveness timers, so that a hung stub is found in seconds."""
    cfg = platform_config(store)
    frontend = replace(cfg.frontend, worker_inactivity_timeout_s=5.0, worker_probe_interval_s=0.5)
    return replace(cfg, frontend=frontend)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def own(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Platform, grpc.aio.Channel]]:
    """A platform of this module's own: its worker is stopped and killed here."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as tests/e2e/conftest.py says why
    work = tmp_path_factory.mktemp("liveness")
    async with running(liveness_config(work / "control.sqlite"), work / "triton") as (platform, channel):
        yield platform, channel


def stub_pids(server_pid: int) -> list[int]:
    """The Python-backend stubs a tritonserver runs: its live child processes named
    triton_python_backend_stub (the kernel keeps the first 15 characters of a name)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:  # it ended meanwhile
            continue
        if not stat:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == server_pid and name == "triton_python_backend_stub"[:15] and state != "Z":
            pids.append(int(entry.name))
    return pids


class HealthLog:
    """Every status the frontend's Health.Watch stream sends, in order."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.statuses: list[int] = []
        self._task = asyncio.ensure_future(self._watch(channel))

    async def _watch(self, channel: grpc.aio.Channel) -> None:
        stub = health_pb2_grpc.HealthStub(channel)
        async for response in stub.Watch(health_pb2.HealthCheckRequest(service="")):
            self.statuses.append(response.status)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + BOUND_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGSTOP, signal.SIGKILL], ids=["stopped", "killed"])
async def test_a_hung_or_dead_stub_mid_stream_ends_interrupted_and_the_worker_comes_back(
    own: tuple[Platform, grpc.aio.Channel], sig: signal.Signals
) -> None:
    platform, channel = own
    health = HealthLog(channel)
    try:
        await until(lambda: health.statuses[-1:] == [SERVING], "the platform never reported SERVING")
        assert platform.triton is not None and platform.triton.process is not None
        server_pid = platform.triton.process.pid
        (stub_pid,) = stub_pids(server_pid)
        stub = generations_pb2_grpc.GenerationsStub(channel)
        req = pb.GenerateRequest(
            model="smollm2-135m",
            prompt="Count:",
            max_output_tokens=2000,
            sampling=pb.SamplingParams(ignore_eos=True),
        )
        events = []
        signalled = False
        async for event in stub.Generate(req, metadata=auth(), timeout=BOUND_S):
            events.append(event)
            if not signalled and sum(e.HasField("delta") for e in events) == 3:
                os.kill(stub_pid, sig)  # once: a reaped stub's pid may already be gone
                signalled = True
        finished = events[-1].finished
        delivered = sum(len(e.delta.token_ids) for e in events if e.HasField("delta"))
        assert finished.reason == Reason.INTERRUPTED
        assert finished.usage.output_tokens == delivered >= 3
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        got = await stub.GetGeneration(
            pb.GetGenerationRequest(generation_id=events[0].generation_id), metadata=auth()
        )
        assert got.state == pb.Generation.State.INTERRUPTED and got.epoch == 1
        assert got.usage.output_tokens == delivered and got.usage_final  # sealed at what was seen

        # the supervisor restarts the worker, its stub with it; not routable meanwhile
        await until(lambda: NOT_SERVING in health.statuses, "health never turned NOT_SERVING")
        await until(lambda: health.statuses[-1] == SERVING, "health never came back to SERVING")
        assert platform.triton.process is not None and platform.triton.process.pid != server_pid
        assert stub_pids(platform.triton.process.pid) not in ([], [stub_pid])
        short = pb.GenerateRequest(model="smollm2-135m", prompt="Hi", max_output_tokens=3)
        events = [e async for e in stub.Generate(short, metadata=auth(), timeout=BOUND_S)]
        assert events[-1].finished.reason == Reason.OUTPUT_LIMIT
    finally:
        await health.close()


def test_a_server_is_the_worker_only_when_it_reports_this_launchs_id(
    platform: Platform, tmp_path: Path
) -> None:
    """Something else answering on the worker's port is not taken for it: the id Triton reports
    back (its --id) must be the one this launch chose."""
    ours = platform.triton
    assert ours is not None and ours.server_id.startswith("llm-worker-")
    model = next(iter(platform.registry.versions.values())).triton_model_name
    ours.check([model])
    other_launch = TritonServer(ours.model_repository, tmp_path, grpc_port=ours.grpc_port)
    other_launch.server_id = "llm-worker-0123456789abcdef"  # what another launch on this port chose
    with pytest.raises(TritonError, match="did not answer"):  # our server refuses its key
        other_launch.check([model])
    other_launch._access_key = ours._access_key  # even with the key, the id it reports is not its own
    with pytest.raises(TritonError, match="answered by another server"):
        other_launch.check([model])
    with pytest.raises(TritonError, match="not ready"):
        ours.check(["no-such-model"])


def test_serving_with_the_triton_port_taken_is_a_clear_start_up_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make serve` while another process holds the Triton gRPC port: a one-line error, no restarts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config = tmp_path / "platform.toml"
        config.write_text(
            f'[frontend]\nlisten = "127.0.0.1:0"\nmetrics_listen = "127.0.0.1:0"\n'
            f'[store]\nurl = "sqlite:///{tmp_path}/control.sqlite"\n'
            f'[triton]\ngrpc_port = {port}\nhttp_port = 0\nmetrics_port = 0\nwork_dir = "{tmp_path}/triton"\n'
        )
        monkeypatch.setattr(sys, "argv", ["serving", "--config", str(config)])
        assert main() == 1
    err = capsys.readouterr().err
    assert f"worker error: Triton grpc port {port} is already in use on 127.0.0.1" in err
    assert "Traceback" not in err
