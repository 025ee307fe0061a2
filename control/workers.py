"""The worker registry: each heartbeat replaces what a worker advertises (address, health, free blocks,
loaded versions with their KV pools and prefix-cache summaries) and extends its registration lease.
Free blocks are an estimate for routing; the worker's own atomic block reservation is what admits a
sequence. A worker whose lease has expired (its host died or stopped) is not routed to. The drain
flag is the operator's, and only Admin changes it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from contracts.prefix_summary import CacheSummary
from control.models import Worker, WorkerHealth, WorkerVersion
from control.revision import bump_revision

DEFAULT_LEASE = timedelta(seconds=30)


@dataclass(slots=True, frozen=True)
class VersionPool:
    """The KV pool one engine of a worker holds for a version."""

    kv_blocks: int  # blocks in the pool
    block_size: int  # tokens per block
    cache: CacheSummary | None = None  # what its prefix cache holds (None: not published)


@dataclass(slots=True, frozen=True)
class WorkerReport:
    worker_id: str
    address: str  # host:port of its Triton gRPC endpoint
    health: WorkerHealth
    free_blocks: int  # KV-cache blocks free now
    loaded_versions: tuple[str, ...]  # model version ids ("name@version") loaded and ready
    pools: Mapping[str, VersionPool] = field(default_factory=dict)  # version id -> its KV pool
    lease_for: timedelta = DEFAULT_LEASE  # the registration holds this long past the heartbeat

    def __post_init__(self) -> None:
        if self.free_blocks < 0:
            raise ValueError("free_blocks must be non-negative")
        if self.lease_for <= timedelta(0):
            raise ValueError("lease_for must be positive")


@dataclass(slots=True, frozen=True)
class RegisteredWorker:
    """A worker whose registration is live, as a frontend routes to it."""

    worker_id: str
    address: str
    health: WorkerHealth
    draining: bool
    free_blocks: int  # as advertised at its last heartbeat
    last_heartbeat: datetime
    lease_expires_at: datetime
    pools: Mapping[str, VersionPool]  # version id -> its KV pool (the versions it has loaded)


def heartbeat(session: Session, report: WorkerReport, *, now: datetime) -> Worker:
    """Creates or refreshes a worker's entry from its report and extends its lease (unknown model
    versions are refused by the foreign key)."""
    worker = session.get(Worker, report.worker_id, with_for_update=True, populate_existing=True)
    if worker is None:
        worker = Worker(id=report.worker_id, draining=False)
        session.add(worker)
    worker.address = report.address
    worker.health = report.health
    worker.free_blocks = report.free_blocks
    worker.last_heartbeat = now
    worker.lease_expires_at = now + report.lease_for
    session.flush()
    loaded = set(report.loaded_versions)
    held = {
        v.model_version_id: v
        for v in session.scalars(select(WorkerVersion).where(WorkerVersion.worker_id == worker.id))
    }
    session.execute(
        delete(WorkerVersion).where(
            WorkerVersion.worker_id == worker.id, WorkerVersion.model_version_id.not_in(loaded)
        )
    )
    for version_id in sorted(loaded):
        pool = report.pools.get(version_id, VersionPool(0, 16))
        row = held.get(version_id)
        if row is None:
            row = WorkerVersion(worker_id=worker.id, model_version_id=version_id)
            session.add(row)
        row.kv_blocks, row.block_size = pool.kv_blocks, pool.block_size
        if pool.cache is not None:
            row.cache_key, row.cached_blocks = pool.cache.compatibility_key, pool.cache.encoded()
    session.flush()
    return worker


def retire_worker(session: Session, worker_id: str, *, now: datetime) -> None:
    """A worker host stopping cleanly: its registration ends now (frontends stop routing to it at
    their next refresh) and it serves nothing. Its drain flag stays. Unknown ids are ignored."""
    worker = session.get(Worker, worker_id, with_for_update=True, populate_existing=True)
    if worker is not None:
        worker.health = WorkerHealth.NOT_SERVING
        worker.lease_expires_at = now
        session.execute(delete(WorkerVersion).where(WorkerVersion.worker_id == worker_id))


def registered_workers(session: Session, *, now: datetime) -> list[RegisteredWorker]:
    """Every worker whose registration lease is live at `now`, by id, with its loaded versions' pools."""
    workers = list(
        session.scalars(
            select(Worker)
            .where(Worker.lease_expires_at.is_not(None), Worker.lease_expires_at > now)
            .order_by(Worker.id)
            .execution_options(populate_existing=True)
        )
    )
    pools: dict[str, dict[str, VersionPool]] = {w.id: {} for w in workers}
    rows = session.scalars(select(WorkerVersion).where(WorkerVersion.worker_id.in_(list(pools))))
    for row in rows:
        cache = None
        if row.cache_key is not None and row.cached_blocks is not None:
            cache = CacheSummary.decode(row.cache_key, row.block_size, row.cached_blocks)
        pools[row.worker_id][row.model_version_id] = VersionPool(row.kv_blocks, row.block_size, cache)
    return [
        RegisteredWorker(
            w.id,
            w.address,
            w.health,
            w.draining,
            w.free_blocks,
            w.last_heartbeat,
            w.lease_expires_at or now,
            pools[w.id],
        )
        for w in workers
    ]


def prune_workers(session: Session, *, expired_before: datetime) -> int:
    """Deletes registrations that expired before `expired_before` and carry no drain flag (a
    drained worker keeps its flag until undrained, whenever it comes back); their loaded versions
    go with them (ON DELETE CASCADE). Returns how many."""
    ids = list(
        session.scalars(
            select(Worker.id).where(
                Worker.lease_expires_at.is_not(None),
                Worker.lease_expires_at < expired_before,
                Worker.draining.is_(False),
            )
        )
    )
    if ids:
        session.execute(delete(Worker).where(Worker.id.in_(ids)))
    return len(ids)


def set_worker_draining(session: Session, worker_id: str, draining: bool, *, now: datetime) -> Worker | None:
    """The operator's drain flag: a draining worker takes no new generations until undrained, across
    restarts (heartbeats never change it). None if the worker is not registered."""
    worker = session.get(Worker, worker_id, with_for_update=True, populate_existing=True)
    if worker is not None and worker.draining != draining:
        worker.draining = draining
        bump_revision(session, now=now)
    return worker


def draining_workers(session: Session) -> frozenset[str]:
    return frozenset(session.scalars(select(Worker.id).where(Worker.draining)))


def ready_workers(
    session: Session, version_id: str, *, now: datetime, stale_after: timedelta
) -> list[Worker]:
    """SERVING, undrained workers with `version_id` loaded and a heartbeat newer than `stale_after`,
    most free blocks first (ties by id)."""
    return list(
        session.scalars(
            select(Worker)
            .join(WorkerVersion, WorkerVersion.worker_id == Worker.id)
            .where(
                WorkerVersion.model_version_id == version_id,
                Worker.health == WorkerHealth.SERVING,
                Worker.draining.is_(False),
                Worker.last_heartbeat > now - stale_after,
            )
            .order_by(Worker.free_blocks.desc(), Worker.id)
        )
    )


def list_workers(session: Session) -> list[tuple[Worker, tuple[str, ...]]]:
    """Every registered worker with its loaded version ids, by id."""
    workers = list(session.scalars(select(Worker).order_by(Worker.id)))
    loaded: dict[str, list[str]] = {w.id: [] for w in workers}
    for worker_id, version_id in session.execute(
        select(WorkerVersion.worker_id, WorkerVersion.model_version_id).order_by(
            WorkerVersion.model_version_id
        )
    ):
        loaded.setdefault(worker_id, []).append(version_id)
    return [(w, tuple(loaded[w.id])) for w in workers]
