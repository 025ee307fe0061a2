"""The fleet of the fleet tests: two worker hosts and two frontends, each its own process tree
(`python -m serving worker|frontend --config …`, started in its own session), over one PostgreSQL
schema, on free loopback ports (a worker host's drawn anew at every start, a frontend's kept).
Each role has its own [repository] path; the worker hosts and the second frontend fetch the
versions they lack from the first frontend's ([fleet] repository_target), as separate machines would.

A role is ready when the store and the frontends say so: a frontend answers health SERVING and its
ListWorkers shows every running worker healthy. Waits are on those conditions, with generous hang
guards (a slow machine takes longer, it never fails for it); a role that exits early fails the
wait with the tail of its log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.compare.serve_setup import toml
from llm.v1 import admin_pb2, admin_pb2_grpc
from serving.triton import SHM, SHM_PREFIX
from serving.triton_host import free_port

ROOT = Path(__file__).resolve().parents[3]
FRONTEND_KEY = "fleet-frontend-secret"
WORKER_KEY = "fleet-worker-secret"
ADMIN_KEY = "fleet-admin-key"
START_S = 300.0  # hang guard: a worker host loads the model (a minute or two on a busy machine)
STOP_S = 120.0


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rpartition(")")[2].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float, check: Callable[[], None]) -> None:
    """Polls `condition` until it holds; `check` raises when waiting further is pointless."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        check()
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f}s"
        time.sleep(0.2)


@dataclass(slots=True, eq=False)
class Role:
    kind: str  # "frontend" or "worker"
    name: str  # f1, w1, ...: a worker's id is "<name>-0"
    base: dict[str, Any]  # the shared config
    work: Path
    proc: subprocess.Popen[bytes] | None = None
    ports: dict[str, int] = field(default_factory=dict)
    starts: int = 0
    repository_from: Role | None = None  # the frontend whose repository it fetches versions from

    @property
    def repository(self) -> Path:
        return self.work / self.name / "repository"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports['grpc']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['metrics']}/metrics"

    @property
    def worker_id(self) -> str:
        return f"{self.name}-0"

    @property
    def log(self) -> Path:
        return self.work / f"{self.name}-{self.starts}.log"

    def config(self) -> dict[str, Any]:
        cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.base.items()}
        cfg["repository"] = {"path": str(self.repository)}
        if self.repository_from is not None:
            cfg["fleet"]["repository_target"] = self.repository_from.address
        if self.kind == "frontend":
            self.ports = self.ports or self.draw_ports()
            cfg["frontend"]["listen"] = self.address
            cfg["frontend"]["metrics_listen"] = f"127.0.0.1:{self.ports['metrics']}"
            cfg["fleet"]["relay_listen"] = f"127.0.0.1:{self.ports['relay']}"
        else:
            self.ports = self.draw_ports()
            cfg["triton"] = {
                "grpc_port": self.ports["grpc"],
                "http_port": self.ports["http"],
                "metrics_port": self.ports["metrics"],
                "exit_timeout_s": 5,
                "work_dir": str(self.work / self.name),
            }
            cfg["worker"] = {"name": self.name}
        return cfg

    def draw_ports(self) -> dict[str, int]:
        names = ("grpc", "metrics", "relay") if self.kind == "frontend" else ("grpc", "http", "metrics")
        return {name: free_port() for name in names}

    def start(self) -> None:
        self.starts += 1
        path = self.work / f"{self.name}.toml"
        path.write_text(toml(self.config()))
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", HF_HUB_OFFLINE="1")
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "serving", self.kind, "--config", str(path)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process tree
            )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        """Raises if it exited; one that lost a free port to another process (drawn here, bound
        there) is started again on new ones."""
        if self.proc is None or self.proc.poll() is None:
            return
        tail = log_tail(self.log)
        if ("already in use" in tail or "cannot listen" in tail) and self.starts < 5:
            self.ports = {}
            self.start()
            return
        raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{tail}")

    def kill(self) -> None:
        """kill -9 of the whole tree: a worker host's tritonserver groups (its stubs), then it."""
        assert self.proc is not None
        for child in children(self.proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)  # tritonserver leads its own group
        self.proc.kill()
        self.proc.wait(timeout=STOP_S)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        # what a crash leaves behind and an operator removes: the Python backend's shared memory
        # (serving/triton.py names it after the process that started tritonserver)
        for region in SHM.glob(f"{SHM_PREFIX}_{self.proc.pid}_*"):
            region.unlink(missing_ok=True)

    def terminate(self) -> int:
        """SIGTERM, and its exit status once it exited."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=STOP_S)


class Fleet:
    def __init__(self, base: dict[str, Any], work: Path) -> None:
        first = Role("frontend", "f1", base, work)
        first.ports = first.draw_ports()  # the others' repository_target before it starts
        self.frontends = [first, Role("frontend", "f2", base, work, repository_from=first)]
        self.workers = [Role("worker", f"w{i}", base, work, repository_from=first) for i in (1, 2)]

    @property
    def roles(self) -> list[Role]:
        return [*self.workers, *self.frontends]

    def whole(self) -> None:
        """Starts every role that is not running and waits until the fleet is ready."""
        for role in self.roles:
            if not role.running:
                role.start()
        for frontend in self.frontends:
            self.wait_ready(frontend)

    def wait_ready(self, frontend: Role) -> None:
        """Health SERVING and every running worker healthy in the frontend's ListWorkers."""
        wanted = {w.worker_id for w in self.workers if w.running}

        def ready() -> bool:
            try:
                with grpc.insecure_channel(frontend.address) as channel:
                    health = health_pb2_grpc.HealthStub(channel).Check(
                        health_pb2.HealthCheckRequest(), timeout=5
                    )
                    listed = admin_pb2_grpc.AdminStub(channel).ListWorkers(
                        admin_pb2.ListWorkersRequest(), metadata=admin(), timeout=5
                    )
            except grpc.RpcError:
                return False
            healthy = {w.worker_id for w in listed.workers if w.healthy}
            return health.status == health_pb2.HealthCheckResponse.SERVING and wanted <= healthy

        def alive() -> None:
            for role in self.roles:
                role.check_alive()

        wait_for(ready, f"frontend {frontend.name} ready with workers {sorted(wanted)}", START_S, alive)

    def stop(self) -> None:
        """SIGTERM to every role at once, then SIGKILL to any that has not exited in time."""
        running = [role for role in self.roles if role.running]
        for role in running:
            assert role.proc is not None
            role.proc.send_signal(signal.SIGTERM)
        for role in running:
            assert role.proc is not None
            try:
                role.proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                role.kill()


def admin() -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {ADMIN_KEY}"),)
