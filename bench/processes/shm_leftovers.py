"""POSIX shared memory that a peer's processes left behind in /dev/shm.

vLLM's shutdown force-kills its engine core and workers ("force killing remaining process" in its
log), and the shared memory they created is not always unlinked: 2 of 4 vLLM runs here left
`psm_*` segments of 160-250 MB each and `sem.mp-*` semaphores in /dev/shm. /dev/shm is memory, so
each such run left about 420 MB of the machine's memory taken until the next boot.

A LoopbackServer (bench/processes/server_process.py) notes what /dev/shm holds before it starts its server.
Once the server's process group is gone it removes what appeared meanwhile under those names,
belongs to this user, and no live process has open or mapped.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

SHM = Path("/dev/shm")
PROC = Path("/proc")
PATTERNS = ("psm_*", "sem.mp-*")  # Python's multiprocessing.shared_memory and its semaphores


def snapshot(shm: Path = SHM) -> set[str]:
    """The names in `shm` that the patterns match."""
    try:
        return {p.name for pattern in PATTERNS for p in shm.glob(pattern)}
    except OSError:
        return set()


def in_use(shm: Path = SHM, proc: Path = PROC) -> set[str]:
    """Names in `shm` that some process this user may inspect has open (a descriptor) or mapped."""
    prefix = f"{shm}/"
    used: set[str] = set()
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        names = [_fd_target(fd) for fd in _entries(pid_dir / "fd")]
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            names += (line[line.find(" /") + 1 :] for line in (pid_dir / "maps").read_text().splitlines())
        used.update(n[len(prefix) :].removesuffix(" (deleted)") for n in names if n.startswith(prefix))
    return used


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _fd_target(fd: Path) -> str:
    """What a descriptor refers to; "" when it closed meanwhile (listing the folder opens one)."""
    try:
        return os.readlink(fd)
    except OSError:
        return ""


def remove_leftovers(before: set[str], shm: Path = SHM, proc: Path = PROC) -> list[str]:
    """Removes what appeared in `shm` since `before` was taken, is this user's, and is in use by
    no process; returns the names removed."""
    removed: list[str] = []
    new = snapshot(shm) - before
    if not new:
        return removed
    busy = in_use(shm, proc)
    for name in sorted(new - busy):
        path = shm / name
        try:
            if path.stat().st_uid != os.getuid():
                continue
            path.unlink()
        except OSError:
            continue
        removed.append(name)
    return removed
