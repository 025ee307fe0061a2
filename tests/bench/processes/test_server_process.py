"""A peer server as a child process: ready when its URL answers, stopped whole (its own children
too), and a server that dies at start reported with its log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.processes.server_process import LoopbackServer, free_port
from tests.bench.processes.fake_servers import SERVE_200

ROOT = Path(__file__).resolve().parents[3]

# A server that forks a child (as vLLM starts its engine), writes both pids, then serves 200s.
FORKING_SERVER = (
    """
import http.server, os, sys
child = os.fork()
if child == 0:
    import signal
    while True:
        signal.pause()  # until the group is killed
open(sys.argv[2], "w").write(f"{os.getpid()} {child}")
"""
    + SERVE_200
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_server_is_ready_when_it_answers_and_stops_with_its_children(tmp_path: Path) -> None:
    port, pids = free_port(), tmp_path / "pids"
    argv = [sys.executable, "-c", FORKING_SERVER, str(port), str(pids)]
    with LoopbackServer("fake", argv, port, "/health", tmp_path / "fake.log", start_timeout_s=30) as server:
        assert server.answers()
        leader, child = (int(p) for p in pids.read_text().split())
        assert alive(leader) and alive(child)
    deadline = time.monotonic() + 30  # a bound, not a timing: a busy machine may reap it late
    while alive(child) and time.monotonic() < deadline:  # the child is reaped by init
        time.sleep(0.05)
    assert not alive(leader) and not alive(child)
    assert server.proc is None


def test_a_server_that_exits_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('no model here'); sys.exit(3)"]
    server = LoopbackServer("fake", argv, free_port(), "/health", tmp_path / "fake.log")
    with pytest.raises(RuntimeError, match="fake exited with 3; its log ends:\nno model here"), server:
        pass
    assert server.proc is None


# A benchmark holding a peer server, as `python -m bench` runs one (exit_on_sigterm first).
BENCH_HOLDING_A_SERVER = """
import signal, sys
from bench.processes.server_process import LoopbackServer, exit_on_sigterm
if sys.argv[4] == "handled":
    exit_on_sigterm()
port, pids, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
server = [sys.executable, "-c", sys.argv[5], str(port), pids]
with LoopbackServer("fake", server, port, "/health", __import__("pathlib").Path(log), start_timeout_s=30):
    print("up", flush=True)
    signal.pause()  # until the test's SIGTERM
"""


@pytest.mark.parametrize("handled", [True, False], ids=["exit_on_sigterm", "default"])
def test_a_benchmark_ended_by_sigterm_stops_the_servers_it_started(tmp_path: Path, handled: bool) -> None:
    port, pids = free_port(), tmp_path / "pids"
    mode = "handled" if handled else "default"
    argv = [sys.executable, "-c", BENCH_HOLDING_A_SERVER, str(port), str(pids), str(tmp_path / "fake.log")]
    bench = subprocess.Popen([*argv, mode, FORKING_SERVER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    leader = child = 0
    try:
        assert bench.stdout is not None
        assert "up\n" in iter(bench.stdout.readline, "")  # after LoopbackServer's "fake ready in ..."
        leader, child = (int(p) for p in pids.read_text().split())
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) == (143 if handled else -signal.SIGTERM)
        if handled:  # stopped before the benchmark exited; the forked child is reaped by init
            deadline = time.monotonic() + 30
            while alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(leader) and not alive(child)
        else:  # orphaned in their own session: nothing stops them
            assert alive(leader) and alive(child)
    finally:
        bench.kill()
        for pid in (leader, child):
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
