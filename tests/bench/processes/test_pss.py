"""bench/processes/pss.py: the memory (PSS) of a process tree, children included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.processes.pss import PeakPss, children, tree_pss

# a child that holds 64 MiB resident (bytes written, so the pages are real) until told to exit
HOLD = (
    "import sys; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); "
    "print('ready', flush=True); sys.stdin.read()"
)


def test_a_child_and_its_memory_count_in_the_tree() -> None:
    alone = tree_pss(os.getpid())
    assert alone > 0
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert child.pid in children(os.getpid())
        with PeakPss(os.getpid(), period_s=0.01) as peak:
            pass  # the first sample is taken on entry, the last before exit
        assert peak.bytes >= tree_pss(child.pid) >= 64 << 20
        assert peak.mib >= 64
        assert sum(peak.parts.values()) == peak.bytes and "MiB" in peak.breakdown()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    assert child.pid not in children(os.getpid())


def test_memory_held_when_the_load_ends_is_in_the_peak_however_long_the_period() -> None:
    """A load's memory is usually largest at its end: the last sample is taken there."""
    named = "open('/proc/self/comm', 'w').write('holder'); " + HOLD  # its part of the peak, by name
    with PeakPss(os.getpid(), period_s=3600) as peak:  # one periodic sample, at the start
        child = subprocess.Popen(
            [sys.executable, "-c", named], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    try:
        assert peak.parts.get("holder", 0) >= 64 << 20, peak.breakdown()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def test_a_process_that_is_gone_counts_nothing() -> None:
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert tree_pss(pid_max + 1) == 0  # no process can have that id
