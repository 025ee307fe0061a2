"""The worker registry: each heartbeat replaces what a worker advertises (address, health, free
blocks, loaded versions). Free blocks are an estimate for routing; the worker's own atomic block
reservation is what admits a sequence. The drain flag is the operator's, and only Admin changes it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from control.models import Worker, WorkerHealth, WorkerVersion
from control.revision import bump_revision


@dataclass(slots=True, frozen=True)
class WorkerReport:
    worker_id: str
    address: str  # host:port of its Triton gRPC endpoint
    health: WorkerHealth
    free_blocks: int  # KV-cache blocks free now
    loaded_versions: tuple[str, ...]  # model version ids ("name@version") loaded and ready

    def __post_init__(self) -> None:
        if self.free_blocks < 0:
            raise ValueError("free_blocks must be non-negative")


def heartbeat(session: Session, report: WorkerReport, *, now: datetime) -> Worker:
    """Creates or refreshes a worker's entry from its report (unknown model versions are refused
    by the foreign key)."""
    worker = session.get(Worker, report.worker_id, with_for_update=True, populate_existing=True)
    if worker is None:
        worker = Worker(id=report.worker_id, draining=False)
        session.add(worker)
    worker.address = report.address
    worker.health = report.health
    worker.free_blocks = report.free_blocks
    worker.last_heartbeat = now
    session.flush()
    loaded = set(report.loaded_versions)
    held = set(
        session.scalars(select(WorkerVersion.model_version_id).where(WorkerVersion.worker_id == worker.id))
    )
    session.execute(
        delete(WorkerVersion).where(
            WorkerVersion.worker_id == worker.id, WorkerVersion.model_version_id.not_in(loaded)
        )
    )
    session.add_all(WorkerVersion(worker_id=worker.id, model_version_id=v) for v in sorted(loaded - held))
    session.flush()
    return worker


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
