"""The worker refuses a corrupted artifact; `make serve`'s command starts, serves and shuts down
cleanly on SIGTERM, leaving no process and no shared-memory region behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from artifacts.manifest import read_manifest
from serving.triton import SHM, SHM_PREFIX, TritonServer
from serving.triton_host import TritonError
from worker.deployment import ModelDeployment, materialize_repository

ROOT = Path(__file__).resolve().parents[2]


def processes_mentioning(marker: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and int(proc.name) != os.getpid():
            pids.append(int(proc.name))
    return pids


def shm_regions(pid: int) -> set[str]:
    """The shared-memory regions of the tritonserver that process `pid` started (serving/triton.py
    names them with that pid): another test run on the machine has its own."""
    return {p.name for p in SHM.iterdir() if p.name.startswith(f"{SHM_PREFIX}_{pid}_")}


def test_worker_refuses_an_artifact_that_fails_its_checksums(artifact_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "artifact"
    bad.mkdir()
    for p in artifact_dir.iterdir():
        if p.name == "model.safetensors":
            (bad / p.name).symlink_to(p)
        else:
            shutil.copy2(p, bad / p.name)
    # A silent numerical change that keeps the file's size, so it is the sha256 that catches it.
    raw = (bad / "config.json").read_text()
    eps = json.dumps(json.loads(raw)["rms_norm_eps"])
    assert raw.count(eps) == 1
    changed = raw.replace(eps, eps[:-1] + str((int(eps[-1]) + 1) % 10))
    (bad / "config.json").write_text(changed)
    version = read_manifest(bad).version
    repo = materialize_repository([ModelDeployment("tampered", bad, version)], tmp_path / "models")
    with (
        TritonServer(repo, tmp_path / "work") as server,
        pytest.raises(TritonError, match=r"config\.json has sha256"),
    ):
        server.load_model("tampered")
    assert processes_mentioning(str(tmp_path)) == []


def test_serve_runs_until_sigterm_and_leaves_nothing_behind(tmp_path: Path) -> None:
    work = tmp_path / "triton"
    config = tmp_path / "platform.toml"
    config.write_text(
        '[frontend]\nlisten = "127.0.0.1:0"\nmetrics_listen = "127.0.0.1:0"\nadmin_api_keys = ["cli-admin"]\n'
        f'[store]\nurl = "sqlite:///{tmp_path / "control.sqlite"}"\n'
        f'[triton]\ngrpc_port = 0\nhttp_port = 0\nmetrics_port = 0\nwork_dir = "{work}"\n'
        '[[tenants]]\nid = "cli"\napi_keys = ["cli-key"]\n'
    )
    serve = subprocess.Popen(
        [sys.executable, "-m", "serving", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        port = None
        deadline = time.monotonic() + 180
        assert serve.stdout is not None
        while port is None and time.monotonic() < deadline:
            line = serve.stdout.readline()
            assert line, "serve exited before it was ready"
            match = re.search(r"gRPC frontend on 127\.0\.0\.1:(\d+)", line)
            port = int(match.group(1)) if match else None
        assert port is not None
        worker_id = None
        while worker_id is None and time.monotonic() < deadline:
            line = serve.stdout.readline()
            assert line, "serve exited before it listed its workers"
            match = re.search(r"worker (\S+): Triton on 127\.0\.0\.1:(\d+)", line)
            if match:  # unnamed: "<hostname>-<its Triton gRPC port>", unique per host
                worker_id = match.group(1)
                assert worker_id == f"{socket.gethostname()[:64]}-{match.group(2)}"
        assert worker_id is not None
        assert processes_mentioning(str(work)), "tritonserver and its stub should be running"
        assert shm_regions(serve.pid), "the stub's shared-memory regions should carry serve's pid"

        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "llmctl.cli",
                "--target",
                f"127.0.0.1:{port}",
                "--api-key",
                "cli-key",
                "generate",
                "The capital of France is",
                "--max-output-tokens",
                "8",
                "--json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 0, cli.stderr
        events = [json.loads(line) for line in cli.stdout.splitlines()]
        assert [int(e["sequence"]) for e in events] == list(range(1, len(events) + 1))
        assert events[-1]["finished"]["reason"] == "OUTPUT_LIMIT"

        denied = subprocess.run(
            [
                sys.executable,
                "-m",
                "llmctl.cli",
                "--target",
                f"127.0.0.1:{port}",
                "--api-key",
                "nope",
                "models",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert denied.returncode == 1 and "UNAUTHENTICATED" in denied.stderr

        def llmctl(*args: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "llmctl.cli", "--target", f"127.0.0.1:{port}", *args]
            return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)

        drained = llmctl("--admin-key", "cli-admin", "drain", worker_id, "--json")
        assert drained.returncode == 0, drained.stderr
        (worker,) = json.loads(drained.stdout)["workers"]
        assert worker["workerId"] == worker_id and worker["draining"] and worker["healthy"]
        not_admin = llmctl("--admin-key", "cli-key", "workers")
        assert not_admin.returncode == 1 and "PERMISSION_DENIED (ADMIN_REQUIRED)" in not_admin.stderr
    finally:
        serve.send_signal(signal.SIGTERM)
        rest, _ = serve.communicate(timeout=60)
    assert serve.returncode == 0, rest
    assert "shutting down" in rest
    assert processes_mentioning(str(work)) == []
    assert shm_regions(serve.pid) == set()
    assert (tmp_path / "control.sqlite").stat().st_size > 0  # migrated and catalogued at start-up
