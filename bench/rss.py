"""Peak resident memory of a process tree while a load runs: a thread samples the RSS of a process and
all its descendants (from /proc) every `period_s`, and keeps the largest sum. Pages shared between
processes (the Python and torch libraries mapped by the frontend and each stub) count once per
process, so the figure is an upper bound on what the tree holds."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType

PAGE = os.sysconf("SC_PAGE_SIZE")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and its descendants now (processes gone meanwhile count 0)."""
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
        stack += children(p)
    return total


class PeakRss:
    """`with PeakRss(pid) as peak:` ... `peak.bytes` is the largest tree RSS sampled meanwhile."""

    def __init__(self, pid: int, period_s: float = 0.25) -> None:
        self.pid, self.period_s, self.bytes = pid, period_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)

    def _run(self) -> None:
        while True:
            self.bytes = max(self.bytes, tree_rss(self.pid))
            if self._stop.wait(self.period_s):
                return

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return self.bytes / (1 << 20)
