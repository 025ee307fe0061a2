"""Which of the workers with room runs a request: prefix-aware, load-bounded, tenant-safe.

    expected hit   the tokens of the request's leading full blocks that a worker holds: its
                   published summary (contracts/prefix_summary.py, refreshed at each heartbeat) or
                   what this frontend sent it since (`RecentPrefixes`, so a burst sharing a prefix
                   follows the first request before the next heartbeat tells). Counting stops at the
                   first block it lacks, as the engine's chained keys do.
    load           this frontend's generations running on the worker (`active`).
    choice         among the workers whose load is within `spill_margin` of the least loaded one,
                   the one with the largest expected hit, then the most free KV blocks, then by id.
                   So a warm worker keeps its prefix's traffic until it runs more than
                   `spill_margin` generations beyond another, and the traffic then spills to the
                   least loaded, which warms up too: one hot prefix cannot pin every request to
                   one worker. With no hit anywhere this is least-loaded routing (most free blocks).

Tenant safety: a request's blocks are hashed with its own tenant's cache salt, and every key a
worker publishes is salted the same way, so a request can only match blocks its own tenant
computed: another tenant's cache never raises (or lowers) its expected hit on any worker.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contracts.block_hash import prefix_block_keys
from contracts.prefix_summary import DEFAULT_SUMMARY_BLOCKS, CacheSummary, fingerprint

if TYPE_CHECKING:
    from frontend.dispatch.worker_pool import WorkerHandle

PREFIX = "prefix"
LEAST_LOADED = "least_loaded"


@dataclass(slots=True, eq=False)
class PromptPrefix:
    """A request's prompt as routing sees it: its tokens and its tenant's cache salt; the
    fingerprints of its full blocks are hashed once per (compatibility key, block size)."""

    token_ids: tuple[int, ...]
    salt: str
    _prints: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)

    def fingerprints(self, compatibility_key: str, block_size: int) -> list[bytes]:
        key = (compatibility_key, block_size)
        if key not in self._prints:
            # the engine never reuses the block holding the prompt's last token (it computes it)
            usable = self.token_ids[:-1]
            keys = prefix_block_keys(usable, block_size, compatibility_key, self.salt)
            self._prints[key] = [fingerprint(k) for k in keys]
        return self._prints[key]


class RecentPrefixes:
    """Fingerprints this frontend sent to one worker for one version, most recent last, at most
    `limit` (the oldest forgotten first)."""

    def __init__(self, limit: int = DEFAULT_SUMMARY_BLOCKS) -> None:
        self.limit = limit
        self._prints: OrderedDict[bytes, None] = OrderedDict()

    def add(self, prints: Sequence[bytes]) -> None:
        for p in prints:
            self._prints[p] = None
            self._prints.move_to_end(p)
        while len(self._prints) > self.limit:
            self._prints.popitem(last=False)

    def __contains__(self, p: bytes) -> bool:
        return p in self._prints


def expected_hit(prefix: PromptPrefix, summary: CacheSummary | None, recent: RecentPrefixes | None) -> int:
    """Tokens of the prompt's leading blocks the worker holds (0 without a summary)."""
    if summary is None:
        return 0
    blocks = 0
    for p in prefix.fingerprints(summary.compatibility_key, summary.block_size):
        if p not in summary.fingerprints and (recent is None or p not in recent):
            break
        blocks += 1
    return blocks * summary.block_size


def choose(
    candidates: Sequence[WorkerHandle],
    version_id: str,
    prefix: PromptPrefix | None,
    policy: str = PREFIX,
    spill_margin: int = 4,
) -> WorkerHandle | None:
    """The worker to run the request among `candidates` (all have room for it); None if none."""
    if not candidates:
        return None
    if prefix is None or policy != PREFIX:
        return max(candidates, key=lambda w: (w.free_blocks(version_id), w.worker_id))
    least = min(w.active for w in candidates)
    within = [w for w in candidates if w.active - least <= spill_margin]

    def score(w: WorkerHandle) -> tuple[int, int, str]:
        hit = expected_hit(prefix, w.caches.get(version_id), w.recent.get(version_id))
        return hit, w.free_blocks(version_id), w.worker_id

    return max(within, key=score)


def remember(worker: WorkerHandle, version_id: str, prefix: PromptPrefix | None) -> None:
    """The request was sent to `worker`: its blocks will be cached there (until the next summary)."""
    summary = worker.caches.get(version_id)
    if prefix is None or summary is None:
        return
    recent = worker.recent.setdefault(version_id, RecentPrefixes())
    recent.add(prefix.fingerprints(summary.compatibility_key, summary.block_size))
