"""The lease sweeper: attempts whose lease expired without a terminal update are INTERRUPTED.

Run it periodically with the current time. Each expired attempt is interrupted and sealed (billing
keeps its last durable watermark; later reports only feed the operator estimate). The scan takes no
locks; each candidate is re-checked under the generation's row lock, so a lease renewed or an attempt
finished meanwhile is left alone, and concurrent sweepers interrupt each attempt once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.attempts import current_attempt
from control.generations import lock_generation
from control.models import Attempt, Generation
from control.termination import LEASE_EXPIRED, interrupt_attempt


@dataclass(slots=True, frozen=True)
class SweptAttempt:
    generation_id: str
    epoch: int
    worker_id: str


def sweep_expired_leases(session: Session, *, now: datetime, limit: int = 100) -> list[SweptAttempt]:
    """Interrupts up to `limit` current attempts whose lease expired at or before `now`."""
    expired = session.execute(
        select(Attempt.generation_id, Attempt.epoch, Attempt.worker_id)
        .join(Generation, Generation.id == Attempt.generation_id)
        .where(
            Attempt.ended_at.is_(None),
            Attempt.lease_expires_at <= now,
            Generation.current_epoch == Attempt.epoch,
        )
        .order_by(Attempt.lease_expires_at, Attempt.generation_id)
        .limit(limit)
    ).all()
    swept = []
    for generation_id, epoch, worker_id in expired:
        attempt = current_attempt(session, lock_generation(session, generation_id))
        if attempt is None or attempt.epoch != epoch or attempt.ended_at is not None:
            continue  # ended or replaced since the scan
        if attempt.lease_expires_at > now:
            continue  # renewed since the scan
        interrupt_attempt(session, generation_id, epoch, reason=LEASE_EXPIRED, now=now)
        swept.append(SweptAttempt(generation_id, epoch, worker_id))
    return swept
