"""The worker gives the C heap's free pages back once its model is loaded (worker/heap.py)."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from worker.heap import release_freed_memory


def resident_kib() -> int:
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1])


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's"
)
def test_free_heap_pages_go_back_to_the_os() -> None:
    # 64 MiB in blocks below glibc's mmap threshold (128 KiB), every one freed but the last, which
    # pins the heap's top: glibc keeps the freed pages resident until they are trimmed
    blocks = [bytearray(64 << 10) for _ in range(1024)]
    for block in blocks:
        block[::4096] = b"\x01" * len(block[::4096])  # touched: resident
    keep = blocks.pop()
    blocks.clear()
    before = resident_kib()
    assert release_freed_memory()
    assert before - resident_kib() > 32 << 10  # most of the 64 MiB went back
    assert len(keep) == 64 << 10
