"""CPU seconds of a process tree from /proc, by role: the platform's own process (the frontend),
tritonserver, and a worker stub's threads by the OS names the worker gives them
(worker/os_thread.py, engine/csrc/pool.cpp). Linux only; processes or threads gone meanwhile
count what they had when last seen by the caller's next sample (nothing)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.processes.pss import children

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
WORKER_THREADS = {"llm-engine": "engine loop", "llm-pool": "kernel pool", "llm-outbox": "outbox"}
ROLES = ("engine loop", "kernel pool", "outbox", "worker other", "tritonserver", "frontend", "other")


def cpu_s(stat: Path) -> float:
    """utime + stime of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file; 0 when gone."""
    try:
        text = stat.read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "; fields[0] is field 3
    return (int(fields[11]) + int(fields[12])) * TICK_S  # fields 14 and 15: utime, stime


def comm(path: Path) -> str:
    try:
        return (path / "comm").read_text().strip()
    except OSError:
        return ""


def role_of(process: str) -> str:
    if process == "tritonserver":
        return "tritonserver"
    if process.startswith("triton_python"):  # the Python backend's stub, one per model instance
        return "worker other"
    return "other"


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of `pid` (the frontend) and its descendants, by role (ROLES)."""
    spent = dict.fromkeys(ROLES, 0.0)
    spent["frontend"] = cpu_s(Path(f"/proc/{pid}/stat"))
    stack = children(pid)
    while stack:
        p = stack.pop()
        proc = Path(f"/proc/{p}")
        role = role_of(comm(proc))
        total = cpu_s(proc / "stat")
        if role == "worker other":  # the named threads on their own; the rest stays "worker other"
            for task in proc.glob("task/*"):
                named = WORKER_THREADS.get(comm(task))
                if named is not None:
                    seconds = cpu_s(task / "stat")
                    spent[named] += seconds
                    total -= seconds
        spent[role] += total
        stack += children(p)
    return spent
