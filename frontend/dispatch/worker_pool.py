"""The workers this frontend routes to, as it sees them: versions each holds (verified at load), KV
capacity per version, the blocks this frontend's generations reserved there (in all and per tenant),
what each one's prefix cache holds (frontend/dispatch/prefix_routing.py), health and draining.

A worker's free blocks are an estimate (its configured pool minus what this frontend reserved); the
worker's own reservation is the authority. With more than one tenant, one tenant may hold at most
`tenant_share` of a worker's pool, so the rest stays for the others (fair memory). Several
frontends sharing workers each estimate from their own reservations: a worker refuses what does
not fit, and the request moves on to the next (frontend/dispatch/dispatcher.py).

The pool of a `make serve` frontend is its local workers (serving/platform.py); a fleet frontend's
is a cache of the store's worker registry (frontend/fleet/worker_directory.py), where a worker whose
stream broke at dispatch is also held `suspect` (not routed to) until it heartbeats again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from contracts.prefix_summary import CacheSummary
from frontend.catalog.registry import ServedVersion
from frontend.dispatch.prefix_routing import PREFIX, PromptPrefix, RecentPrefixes, choose
from frontend.dispatch.worker_client import TritonWorker


@dataclass(slots=True)
class WorkerHandle:
    worker_id: str
    address: str  # Triton gRPC host:port
    client: TritonWorker
    capacity: dict[str, int] = field(default_factory=dict)  # version id -> KV blocks of its engine
    reserved: dict[str, int] = field(default_factory=dict)  # version id -> blocks of our generations
    by_tenant: dict[tuple[str, str], int] = field(default_factory=dict)  # (version, tenant) -> blocks
    active: int = 0  # generations running on it now
    dispatched: int = 0  # generations sent to it, all told
    healthy: bool = True
    draining: bool = False
    last_heartbeat: float = 0.0  # time.time() of the last health check that passed
    suspect_since: float | None = None  # time.time() its stream broke at dispatch (fleet pools only)
    caches: dict[str, CacheSummary] = field(default_factory=dict)  # version id -> its prefix cache's summary
    recent: dict[str, RecentPrefixes] = field(default_factory=dict)  # version id -> blocks we sent since

    def free_blocks(self, version_id: str) -> int:
        return self.capacity.get(version_id, 0) - self.reserved.get(version_id, 0)

    def routable(self, version_id: str) -> bool:
        return (
            self.healthy and not self.draining and self.suspect_since is None and version_id in self.capacity
        )

    def tenant_cap(self, version_id: str, share: float) -> int:
        """The most blocks one tenant may hold of this worker's pool for the version."""
        return int(self.capacity.get(version_id, 0) * share)

    def fits(self, version_id: str, blocks: int, tenant: str | None, share: float) -> bool:
        if self.free_blocks(version_id) < blocks:
            return False
        held = self.by_tenant.get((version_id, tenant), 0) if tenant is not None else 0
        return tenant is None or held + blocks <= self.tenant_cap(version_id, share)


class WorkerPool:
    def __init__(self) -> None:
        self.workers: dict[str, WorkerHandle] = {}
        self.block_size: dict[str, int] = {}  # version id -> tokens per KV block of its engines
        # the share of a worker's KV pool one tenant may hold (fair memory: the rest stays for the
        # other tenants); 1.0 while the catalog has a single tenant (frontend/catalog/cache.py sets it)
        self.tenant_share = 1.0
        self.changed = asyncio.Event()  # set when a worker's health changes (the health check waits)
        self.holds_suspects = False  # a worker whose stream broke at dispatch is held back (fleet)
        self.policy = PREFIX  # or LEAST_LOADED ([routing] policy; frontend/dispatch/prefix_routing.py)
        self.spill_margin = 4  # [routing] spill_margin

    def set_healthy(self, worker_id: str, healthy: bool) -> None:
        self.workers[worker_id].healthy = healthy
        self.changed.set()

    def lost(self, worker_id: str) -> None:
        """A worker's stream broke before its first response: in a pool that holds suspects, it is
        not routed to until its next heartbeat (a worker host that died sends none)."""
        worker = self.workers.get(worker_id)
        if self.holds_suspects and worker is not None and worker.suspect_since is None:
            worker.suspect_since = time.time()
            self.changed.set()

    def add(self, worker: WorkerHandle) -> None:
        self.workers[worker.worker_id] = worker

    def routable(self, version_id: str) -> list[WorkerHandle]:
        return [w for w in self.workers.values() if w.routable(version_id)]

    def with_room(
        self,
        version_id: str,
        blocks: int,
        exclude: frozenset[str] = frozenset(),
        tenant: str | None = None,
        prefix: PromptPrefix | None = None,
    ) -> WorkerHandle | None:
        """Among the routable workers where the blocks fit (within the tenant's share of that
        worker's pool too), the one prefix_routing.choose() picks: by the prompt's cached prefix
        within the spill margin, else the most estimated free blocks."""
        share = self.tenant_share
        fits = [
            w
            for w in self.routable(version_id)
            if w.worker_id not in exclude and w.fits(version_id, blocks, tenant, share)
        ]
        return choose(fits, version_id, prefix, self.policy, self.spill_margin)


async def ready_workers(pool: WorkerPool, version: ServedVersion) -> int:
    """Routable workers whose Triton reports the version's model ready now."""
    ready = 0
    for w in pool.routable(version.version_id):
        ready += await w.client.is_model_ready(version.triton_model_name)
    return ready
