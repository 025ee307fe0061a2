"""What a worker's prefix cache holds, as a bounded summary that frontends route by.

    fingerprint   the first FINGERPRINT_BYTES of a block's prefix-cache key (contracts/block_hash.py).
                  The key is already salted per tenant, so a fingerprint names one tenant's block
                  without naming the tenant or its tokens, and a request can only ever match
                  fingerprints of its own salt.
    summary       at most `limit` fingerprints of one engine (blocks in use first, then cached ones
                  from the most recently released), with the compatibility key and block size the
                  frontend needs to hash a prompt the same way.

The worker (inside Triton's stub) writes its summary to a file (`write_summary`), which its host
publishes in the worker registry at each heartbeat; a frontend reads it from the registry (or, in
`make serve`, from the files) and counts how many of a prompt's leading blocks a worker holds.
A fingerprint collision (2^-64 per pair) can only mis-route, never serve a wrong block: the engine
confirms every hit by its tokens.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

FINGERPRINT_BYTES = 8
DEFAULT_SUMMARY_BLOCKS = 4096  # per engine: 64 KiB of fingerprints; 65,536 tokens at 16 a block


@dataclass(slots=True, frozen=True)
class CacheSummary:
    compatibility_key: str  # the engine's: part of every key
    block_size: int  # tokens per block
    fingerprints: frozenset[bytes] = field(default_factory=frozenset)

    def encoded(self) -> bytes:
        """The fingerprints, concatenated in sorted order (the registry's column)."""
        return b"".join(sorted(self.fingerprints))

    @classmethod
    def decode(cls, compatibility_key: str, block_size: int, blob: bytes) -> CacheSummary:
        n = FINGERPRINT_BYTES
        prints = frozenset(blob[i : i + n] for i in range(0, len(blob) - n + 1, n))
        return cls(compatibility_key, block_size, prints)

    def union(self, other: CacheSummary) -> CacheSummary:
        """Two engines of one worker serving the same version (several instances)."""
        return CacheSummary(self.compatibility_key, self.block_size, self.fingerprints | other.fingerprints)


def fingerprint(key: bytes) -> bytes:
    return key[:FINGERPRINT_BYTES]


def summary_path(folder: Path, server_pid: int, model: str, engine_pid: int) -> Path:
    """One engine's file: under its `tritonserver`'s pid (which the host knows), per stub process."""
    return folder / str(server_pid) / f"{model}.{engine_pid}.json"


def write_summary(path: Path, summary: CacheSummary) -> None:
    """Atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    body = {
        "compatibility_key": summary.compatibility_key,
        "block_size": summary.block_size,
        "blocks": summary.encoded().hex(),
    }
    tmp.write_text(json.dumps(body))
    tmp.replace(path)


def read_summary(path: Path) -> CacheSummary | None:
    """None when the file is gone or malformed (its engine is being replaced)."""
    try:
        body = json.loads(path.read_text())
        return CacheSummary.decode(
            body["compatibility_key"], int(body["block_size"]), bytes.fromhex(body["blocks"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
