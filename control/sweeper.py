"""The lease sweeper's control half: finding current attempts whose lease expired without a terminal
update, and interrupting each one (terminal reason LEASE_EXPIRED).

The scan takes no locks; each candidate is re-checked under the generation's row lock, so a lease
renewed or an attempt finished meanwhile is left alone, and concurrent sweepers interrupt each attempt
once. The lifecycle layer runs both in one transaction and seals each interrupted attempt's bill.
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


def expired_attempts(session: Session, *, now: datetime, limit: int = 100) -> list[SweptAttempt]:
    """Up to `limit` current, unended attempts whose lease expired at or before `now`, oldest lease
    first (ties by generation id). Reads without locks: see `interrupt_expired`."""
    rows = session.execute(
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
    return [SweptAttempt(generation_id, epoch, worker_id) for generation_id, epoch, worker_id in rows]


def interrupt_expired(session: Session, candidate: SweptAttempt, *, now: datetime) -> Generation | None:
    """Interrupts `candidate` (LEASE_EXPIRED) if, under its generation's row lock, it is still the
    current unended attempt and its lease has expired at `now`; None if it was renewed, ended or
    replaced since the scan."""
    generation = lock_generation(session, candidate.generation_id)
    attempt = current_attempt(session, generation.id, generation.current_epoch)
    if attempt is None or attempt.epoch != candidate.epoch or attempt.ended_at is not None:
        return None
    if attempt.lease_expires_at > now:
        return None
    return interrupt_attempt(session, candidate.generation_id, candidate.epoch, reason=LEASE_EXPIRED, now=now)
