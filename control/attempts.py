"""Execution attempts: a new epoch per attempt, a time-limited lease, and the fence on every write.

    start_attempt ──> Lease(generation, epoch, worker, expires_at) ──> renew_lease ... ──> termination

An attempt may write (renew, finish) only while its epoch is the generation's current epoch, it has
not ended, and its lease has not expired at `now`; otherwise `fence` raises a `FencingError`. So a
replaced worker's late terminal update is rejected, whatever it carries. Billing is not touched
here: the lifecycle layer opens and seals the usage watermark of each attempt started and ended here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from control import attempt_sql as sql
from control.errors import (
    AttemptEnded,
    CancelRequested,
    IllegalTransition,
    LeaseExpired,
    LeaseHeld,
    StaleEpoch,
)
from control.generation_rows import GenerationRow, lock_row, start_epoch
from control.states import GenerationState

SUPERSEDED = "SUPERSEDED"  # attempt terminal reason: its lease expired and a new attempt replaced it


@dataclass(slots=True, frozen=True)
class Lease:
    """What a worker's attempt holds: the fencing token for its writes."""

    generation_id: str
    epoch: int  # 1 for the first attempt, +1 per new attempt
    worker_id: str
    expires_at: datetime


@dataclass(slots=True, frozen=True)
class AttemptRecord:
    """An attempt's row as read under its lock (the `attempts` table is written by statements built
    once, control/attempt_sql.py, not through the ORM's unit of work)."""

    generation_id: str
    epoch: int
    worker_id: str
    started_at: datetime
    lease_expires_at: datetime
    ended_at: datetime | None


@dataclass(slots=True, frozen=True)
class StartedAttempt:
    lease: Lease  # the new attempt's
    superseded: int | None  # epoch of the expired attempt it replaced (ended here); None if none
    repeated: bool = False  # a retried call found the attempt it had started: nothing new written


def start_attempt(
    session: Session, generation_id: str, *, worker_id: str, now: datetime, lease_for: timedelta
) -> StartedAttempt:
    """A new epoch on `worker_id`: QUEUED -> RUNNING, or a re-dispatch of a RUNNING generation.

    A current attempt whose lease has expired is ended first (INTERRUPTED, reason SUPERSEDED);
    one whose lease is still valid raises `LeaseHeld`, unless it is this call's own (same worker and
    start time: a retry after the first try committed and its answer was lost), which is returned.
    A terminal generation raises `IllegalTransition`; one with a cancel request `CancelRequested`.
    """
    if lease_for <= timedelta(0):
        raise ValueError("lease_for must be positive")
    generation = lock_row(session, generation_id)
    if generation.state.terminal:
        raise IllegalTransition(generation.id, str(generation.state), str(GenerationState.RUNNING))
    if generation.cancel_requested:
        raise CancelRequested(generation.id)
    previous = current_attempt(session, generation.id, generation.current_epoch)
    superseded = None
    if previous is not None and previous.ended_at is None:
        if previous.worker_id == worker_id and previous.started_at == now:  # this very call, retried
            lease = Lease(generation.id, previous.epoch, worker_id, previous.lease_expires_at)
            return StartedAttempt(lease, None, repeated=True)
        if previous.lease_expires_at > now:
            raise LeaseHeld(generation.id, previous.epoch)
        end_attempt(session, previous, outcome=GenerationState.INTERRUPTED, reason=SUPERSEDED, now=now)
        superseded = previous.epoch
    epoch = (generation.current_epoch or 0) + 1
    start_epoch(session, generation, epoch, now=now)
    expires_at = now + lease_for
    session.connection().execute(
        sql.INSERT,
        {"generation": generation.id, "attempt": epoch, "worker": worker_id, "at": now, "until": expires_at},
    )
    return StartedAttempt(Lease(generation.id, epoch, worker_id, expires_at), superseded)


def end_attempt(
    session: Session, attempt: AttemptRecord, *, outcome: GenerationState, reason: str, now: datetime
) -> None:
    """Records the attempt's end, outcome and terminal reason; an attempt that ended keeps its own.
    The caller holds the generation's row lock."""
    if attempt.ended_at is None:
        params = {"generation": attempt.generation_id, "attempt": attempt.epoch, "at": now}
        session.connection().execute(sql.END, params | {"result": outcome, "reason": reason})


def renew_lease(session: Session, lease: Lease, *, now: datetime, lease_for: timedelta) -> Lease:
    """Extends a live lease to `now + lease_for`; a fenced-off attempt gets a `FencingError`."""
    return renew_lease_of(session, lease, now=now, lease_for=lease_for)[0]


def renew_lease_of(
    session: Session, lease: Lease, *, now: datetime, lease_for: timedelta
) -> tuple[Lease, GenerationRow]:
    """`renew_lease`, with the generation's row as the fence read it (its cancel intent)."""
    generation, attempt = fence(session, lease, now=now)
    until = max(attempt.lease_expires_at, now + lease_for)
    if until != attempt.lease_expires_at:
        params = {"generation": lease.generation_id, "attempt": lease.epoch, "until": until}
        session.connection().execute(sql.RENEW, params)
    return Lease(lease.generation_id, lease.epoch, lease.worker_id, until), generation


def fence(session: Session, lease: Lease, *, now: datetime) -> tuple[GenerationRow, AttemptRecord]:
    """The locked generation and attempt, if `lease` may still write at `now`; else a `FencingError`.

    The store's lease expiry is authoritative, not `lease.expires_at`.
    """
    generation = lock_row(session, lease.generation_id)
    attempt = _lock_attempt(session, lease.generation_id, lease.epoch)
    if generation.current_epoch != lease.epoch or attempt is None or attempt.worker_id != lease.worker_id:
        raise StaleEpoch(lease.generation_id, lease.epoch, generation.current_epoch)
    if attempt.ended_at is not None:
        raise AttemptEnded(lease.generation_id, lease.epoch)
    if attempt.lease_expires_at <= now:
        raise LeaseExpired(lease.generation_id, lease.epoch)
    return generation, attempt


def current_attempt(session: Session, generation_id: str, current_epoch: int | None) -> AttemptRecord | None:
    """The generation's current attempt (`current_epoch`: its row's), locked; None before its first.
    The caller holds the generation's row lock."""
    if current_epoch is None:
        return None
    return _lock_attempt(session, generation_id, current_epoch)


def _lock_attempt(session: Session, generation_id: str, epoch: int) -> AttemptRecord | None:
    params = {"generation": generation_id, "attempt": epoch}
    row = session.connection().execute(sql.LOCK, params).one_or_none()
    return None if row is None else AttemptRecord(generation_id, *row)
