"""Shared memory a peer's killed processes left in /dev/shm is removed after the peer stops; what a
live process still holds (a descriptor or a mapping) stays. Real /dev/shm, real /proc."""

from __future__ import annotations

import mmap
import os
import sys
import uuid
from multiprocessing import shared_memory
from pathlib import Path

import pytest

from bench.processes import shm_leftovers
from bench.processes.server_process import LoopbackServer, free_port
from tests.bench.processes.fake_servers import SERVE_200

SHM = Path("/dev/shm")
pytestmark = pytest.mark.skipif(not SHM.is_dir(), reason="needs POSIX shared memory in /dev/shm")


def segment(name: str, size: int = 4096) -> Path:
    """A segment as shm_open makes one, its creator gone (nothing holds it)."""
    fd = os.open(SHM / name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, size)
    os.close(fd)
    return SHM / name


def test_what_nothing_holds_is_removed_and_what_a_process_holds_stays() -> None:
    before = shm_leftovers.snapshot()
    tag = uuid.uuid4().hex[:12]
    leaked = segment(f"psm_{tag}_left")
    leaked_sem = segment(f"sem.mp-{tag}", 32)
    held = shared_memory.SharedMemory(create=True, size=4096)  # open and mapped here
    mapped_path = segment(f"psm_{tag}_mapped")
    with mapped_path.open("r+b") as f:  # mapped only: its descriptor closes with the block
        mapped = mmap.mmap(f.fileno(), 4096)
    try:
        removed = shm_leftovers.remove_leftovers(before)
        assert f"psm_{tag}_left" in removed and f"sem.mp-{tag}" in removed
        assert not leaked.exists() and not leaked_sem.exists()
        assert held.name not in removed and (SHM / held.name).exists()
        assert mapped_path.name not in removed and mapped_path.exists()
        assert {held.name, mapped_path.name} <= shm_leftovers.in_use()
    finally:
        mapped.close()
        mapped_path.unlink()
        held.close()
        held.unlink()


def test_names_that_were_there_before_are_kept() -> None:
    tag = uuid.uuid4().hex[:12]
    older = segment(f"psm_{tag}_older")
    try:
        before = shm_leftovers.snapshot()
        assert older.name in before
        assert older.name not in shm_leftovers.remove_leftovers(before)
        assert older.exists()
    finally:
        older.unlink()


# A server whose child (as vLLM's engine) maps a segment, records its name, and outlives SIGTERM:
# the group's SIGKILL ends it with the segment left in /dev/shm.
CHILD_HOLDS_SEGMENT = (
    """
import http.server, mmap, os, signal, sys, time
name = sys.argv[2]
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    fd = os.open("/dev/shm/" + name, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    m = mmap.mmap(fd, 4096)
    open(sys.argv[3], "w").write(name)
    while True:
        signal.pause()  # SIGTERM ignored: until the group's SIGKILL
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
"""
    + SERVE_200
)


def test_a_stopped_server_leaves_no_shared_memory_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, name, ready = free_port(), f"psm_{uuid.uuid4().hex[:12]}_peer", tmp_path / "ready"
    argv = [sys.executable, "-c", CHILD_HOLDS_SEGMENT, str(port), name, str(ready)]
    with LoopbackServer("peer", argv, port, "/health", tmp_path / "peer.log", start_timeout_s=30):
        assert ready.read_text() == name
        assert (SHM / name).exists() and name in shm_leftovers.in_use()
    assert not (SHM / name).exists()
    assert "peer: removed 1 shared-memory files its processes left in /dev/shm" in capsys.readouterr().out
