"""A peer server as a child process: ready when its URL answers, stopped whole (its own children
too), and a server that dies at start reported with its log."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from bench.server_process import LoopbackServer, free_port
from tests.bench.fake_servers import SERVE_200

# A server that forks a child (as vLLM starts its engine), writes both pids, then serves 200s.
FORKING_SERVER = (
    """
import http.server, os, sys
child = os.fork()
if child == 0:
    import time
    while True:
        time.sleep(1)
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
    deadline = time.monotonic() + 5
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
