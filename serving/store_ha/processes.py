"""The HA store's daemons as processes: alive or not, signalled, listening; and, as root, their
files owned by the `postgres` user they run as (serving/store_ha/cluster.py)."""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import socket
from pathlib import Path


def own_by_postgres(path: Path) -> None:
    """As root, the nodes run as `postgres`: their files are its."""
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        for p in [path, *path.rglob("*")]:
            os.chown(p, entry.pw_uid, entry.pw_gid)


def exists(pid: int) -> bool:
    """The process is alive (a zombie is not)."""
    with contextlib.suppress(ChildProcessError):  # reap it if it is this process's own child
        os.waitpid(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped) is gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return True


def kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0
