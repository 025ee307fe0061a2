"""The sha256 of files, remembered by each file's identity so that an unchanged file is hashed once.

A file's identity is its stat: (device, inode, size, mtime_ns, ctime_ns). Any write to a file, a
rename over it or a change of its metadata moves its ctime, and no process can set ctime back (the
kernel sets it to the current time; only changing the system clock could), so a digest stays valid
exactly as long as its identity is unchanged. This is git's index, for artifacts.

Within a process the digests are kept in memory. A process that calls `record_in(folder)` (the
serving roles: var/verified) also keeps them on disk, one small file per identity, and trusts those
recorded by other processes: a warm start then hashes none of a 500 MB artifact's bytes again.

    <folder>/<sha256 of the identity, 32 hex>.json   {"identity": [dev, ino, size, mtime, ctime],
                                                      "sha256": "<hex>"}

Each record is written atomically (a temporary file renamed), so concurrent processes need no lock:
two that hash the same file write the same record. A record is only written for a file whose
mtime and ctime are older than `SETTLED_S` when its hash starts: a write landing within the same
timestamp tick as the stat (coarse clocks tick every few ms) could otherwise leave the identity
unchanged over content that changed after the hash read it (git's "racy" entries). Such a file is
remembered in memory only and hashed again by the next process.

What a record does not catch: bytes changed beneath the file system (media corruption, a disk image
edited offline), which every start used to catch by hashing. Delete the folder to hash everything
again. A record is as trustworthy as the folder holding it: keep it where only the operator writes,
as the artifacts are.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

SETTLED_S = 2.0  # a file written this recently (by mtime or ctime) is not recorded on disk

Identity = tuple[int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def identity_of(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileDigests:
    """sha256 of the files hashed through it, valid while each file's identity is unchanged.

    hash_file: the function that reads a file's bytes (tests count its calls). now_ns: the wall
    clock, in the file system's timestamps' terms (time.time_ns)."""

    def __init__(
        self,
        hash_file: Callable[[Path], str] = sha256_file,
        now_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.hash_file = hash_file
        self.now_ns = now_ns
        self.folder: Path | None = None  # where records are kept between processes (None: memory only)
        self._known: dict[Path, tuple[Identity, str]] = {}

    def sha256(self, path: Path) -> str:
        st = path.stat()  # before reading: a write during the hash moves ctime, so it is hashed again
        identity = identity_of(st)
        known = self._known.get(path)
        if known is not None and known[0] == identity:
            return known[1]
        digest = self._recorded(identity)
        if digest is None:
            settled = self.now_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > SETTLED_S * 1e9
            digest = self.hash_file(path)
            if settled:
                self._record(identity, digest)
        self._known[path] = (identity, digest)
        return digest

    def _path(self, identity: Identity) -> Path | None:
        if self.folder is None:
            return None
        name = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:32]
        return self.folder / f"{name}.json"

    def _recorded(self, identity: Identity) -> str | None:
        path = self._path(identity)
        if path is None:
            return None
        try:
            raw = json.loads(path.read_text())
            if tuple(raw["identity"]) == identity and isinstance(raw["sha256"], str):
                return raw["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None  # none, unreadable, or another identity's: hash the file

    def _record(self, identity: Identity, digest: str) -> None:
        path = self._path(identity)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"identity": list(identity), "sha256": digest}))
            tmp.replace(path)
        except OSError:
            pass  # a read-only or full disk: the next process hashes the file again
