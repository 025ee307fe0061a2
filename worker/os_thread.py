"""Names the calling thread for the OS (`top -H`, `ps -L`, /proc/<pid>/task/<tid>/comm, perf), so a
worker's CPU can be told apart by thread: `llm-engine` (the engine loop, the kernels' caller),
`llm-outbox` (responses and cancellation checks), `llm-pool` (the kernels' helpers,
engine/csrc/pool.cpp). Python's own thread names are not the OS's before 3.14."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_PR_SET_NAME = 15  # prctl(2): the calling thread's name, at most 15 bytes


def name_os_thread(name: str) -> None:
    """Best effort: names the calling thread where Linux's prctl is at hand, else does nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        return
