"""Ending generations: control ends the attempt and the generation (fenced by epoch and lease),
billing seals the attempt's bill and, once the generation is terminal, releases its reservation;
both in one transaction. The caller flushes the attempt's final usage first (`flush_final`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from billing.ledger import release_reservation
from billing.usage import WatermarkView
from control import termination
from control.attempts import Lease
from control.generation_rows import GenerationRow
from control.generations import lock_generation, stale_queued
from control.models import Generation
from control.states import GenerationState
from control.sweeper import SweptAttempt, expired_attempts, interrupt_expired
from datastore.store import Store
from lifecycle.sealing import charge_of, seal_ended_attempt

QUEUE_ABANDONED = "QUEUE_ABANDONED"  # terminal reason of a QUEUED generation whose frontend went away


@dataclass(slots=True, frozen=True)
class Ended:
    generation_id: str
    state: GenerationState  # the generation's state now
    terminal_reason: str | None
    finished_at: datetime | None
    bill: WatermarkView | None  # the ended attempt's sealed watermark; None if none ever started


def finish(store: Store, lease: Lease, *, state: GenerationState, reason: str, now: datetime) -> Ended:
    """The attempt holding `lease` ends its generation in terminal `state` with `reason` (e.g.
    OUTPUT_LIMIT). Raises control's `FencingError` for a replaced or expired attempt and
    `IllegalTransition` for a non-terminal `state`."""
    with store.transaction() as session:
        generation = termination.finish_attempt(session, lease, state=state, reason=reason, now=now)
        return _ended(generation, seal_ended_attempt(session, generation, lease.epoch, now=now))


def interrupt(store: Store, generation_id: str, epoch: int, *, reason: str, now: datetime) -> Ended:
    """The control plane declares the current attempt `epoch` lost (e.g. WORKER_LOST): it ends
    INTERRUPTED, with its generation if RUNNING, at its last recorded watermark. Raises `StaleEpoch`
    if `epoch` is not current and `AttemptEnded` if it already ended."""
    with store.transaction() as session:
        generation = termination.interrupt_attempt(session, generation_id, epoch, reason=reason, now=now)
        return _ended(generation, seal_ended_attempt(session, generation, epoch, now=now))


def finish_queued(
    store: Store, generation_id: str, *, state: GenerationState, reason: str, now: datetime
) -> Ended:
    """Ends a QUEUED generation (no attempt ever started) as CANCELED or FAILED and releases its
    whole reservation. Any other state raises `IllegalTransition`."""
    with store.transaction() as session:
        generation = termination.finish_queued(session, generation_id, state=state, reason=reason, now=now)
        release_reservation(session, charge_of(generation), now=now)
        return _ended(generation, None)


def withdraw_queued(store: Store, generation_id: str, *, now: datetime) -> None:
    """A QUEUED generation the platform refused before any attempt (e.g. no worker had room within
    its tier's allowance): its whole reservation is released and its record deleted, so the
    refusal is final for that request only and a retry with the same request id starts afresh."""
    with store.transaction() as session:
        generation = lock_generation(session, generation_id)
        release_reservation(session, charge_of(generation), now=now)
        termination.withdraw_queued(session, generation_id)


def withdraw_unadmitted(store: Store, lease: Lease, *, now: datetime) -> None:
    """A generation whose first attempt started but that no worker admitted (each refused it for
    room or was down): nothing ran and nothing is billed; its reservation is released and its
    record deleted, so a retry with the same request id starts afresh (as `withdraw_queued`).
    Raises control's `FencingError` for a replaced or expired attempt."""
    with store.transaction() as session:
        generation = termination.unadmitted(session, lease, now=now)
        release_reservation(session, charge_of(generation), now=now)
        termination.delete_generation(session, generation.id)


def sweep_expired_leases(store: Store, *, now: datetime, limit: int = 100) -> list[SweptAttempt]:
    """Interrupts (LEASE_EXPIRED) and seals up to `limit` current attempts whose lease expired at or
    before `now`, oldest first; returns those it interrupted. Billing keeps each one's last durable
    watermark; later reports only feed the operator's estimate."""
    swept = []
    with store.transaction() as session:
        for candidate in expired_attempts(session, now=now, limit=limit):
            generation = interrupt_expired(session, candidate, now=now)
            if generation is None:
                continue  # renewed, ended or replaced since the scan
            seal_ended_attempt(session, generation, candidate.epoch, now=now)
            swept.append(candidate)
    return swept


def sweep_abandoned_queued(
    store: Store, *, now: datetime, older_than: timedelta, limit: int = 100
) -> list[str]:
    """Fails (QUEUE_ABANDONED) up to `limit` QUEUED generations untouched for `older_than` (their
    frontend went away before a worker had room), releasing their reservations: nothing is billed."""
    ended = []
    with store.transaction() as session:
        for generation_id in stale_queued(session, before=now - older_than, limit=limit):
            generation = lock_generation(session, generation_id)
            if generation.state is not GenerationState.QUEUED:
                continue  # dispatched or ended since the scan
            termination.finish_queued(
                session, generation_id, state=GenerationState.FAILED, reason=QUEUE_ABANDONED, now=now
            )
            release_reservation(session, charge_of(generation), now=now)
            ended.append(generation_id)
    return ended


def _ended(generation: Generation | GenerationRow, bill: WatermarkView | None) -> Ended:
    return Ended(generation.id, generation.state, generation.terminal_reason, generation.finished_at, bill)
