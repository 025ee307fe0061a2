"""Peak memory of a process tree while a load runs: a thread samples a process and all its
descendants (from /proc) every `period_s`, and keeps the largest sum. Each process counts its
proportional set size (PSS, /proc/<pid>/smaps_rollup): a page shared by n processes (the Python and
torch libraries mapped by several) counts 1/n in each, so the sum is what the tree holds, where a
sum of RSS would count shared pages once per process."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def pss(pid: int) -> int:
    """Bytes of `pid`'s proportional set size; 0 when it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    line = next((x for x in text.splitlines() if x.startswith("Pss:")), "")
    return int(line.split()[1]) * 1024 if line else 0


def tree_parts(pid: int) -> dict[str, int]:
    """Bytes (PSS) that `pid` and its descendants hold now, by process name (processes of one name
    summed; processes gone meanwhile count 0)."""
    parts: dict[str, int] = {}
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            name = Path(f"/proc/{p}/comm").read_text().strip()
        except OSError:
            continue
        parts[name] = parts.get(name, 0) + pss(p)
        stack += children(p)
    return parts


def tree_pss(pid: int) -> int:
    """Bytes that `pid` and its descendants hold now (their PSS)."""
    return sum(tree_parts(pid).values())


class PeakPss:
    """`with PeakPss(pid) as peak:` ... `peak.bytes` is the largest tree PSS sampled meanwhile (every
    `period_s` and once more at the end, where a load's memory is usually largest), and
    `peak.parts` that sample by process name.

    A sample is not free: smaps_rollup walks the process's page tables, 49 ms for a 5 GiB process
    on a 2-core Zen 4 (13 ms for the platform's worker), time taken from the cores the load runs on.
    Every 2 s it costs vLLM's tree about 1% of the two cores and the platform's about 0.3%; every
    0.5 s it was 4x that, and uneven between targets of different sizes."""

    def __init__(self, pid: int, period_s: float = 2.0) -> None:
        self.pid, self.period_s, self.bytes = pid, period_s, 0
        self.parts: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-pss", daemon=True)

    def _sample(self) -> None:
        parts = tree_parts(self.pid)
        if sum(parts.values()) > self.bytes:
            self.bytes, self.parts = sum(parts.values()), parts

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.period_s):
                return

    def __enter__(self) -> PeakPss:
        self._thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    @property
    def mib(self) -> float:
        return self.bytes / (1 << 20)

    def breakdown(self) -> str:
        """ "name 123 MiB, ..." of the peak sample, largest first."""
        parts = sorted(self.parts.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{name} {b / (1 << 20):.0f} MiB" for name, b in parts)


def memory_note(who: str, peak: PeakPss, tree: str = "its") -> str:
    """The report's note of a target's peak memory over one load."""
    return f"{who}: peak memory {peak.mib:.0f} MiB (PSS of {tree} process tree: {peak.breakdown()})"
