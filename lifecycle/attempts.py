"""Attempts as use cases: each new epoch opens its usage watermark; the expired attempt it replaces
is ended by control and its bill sealed, in the same transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from billing.seal import seal_watermark
from billing.usage import open_watermark
from control import attempts
from control.attempts import Lease
from control.errors import ControlError
from datastore.store import Store


@dataclass(slots=True, frozen=True)
class Dispatch:
    """Where a new attempt runs, and for how long its first lease holds."""

    worker_id: str
    lease_for: timedelta  # positive


def start_attempt(store: Store, generation_id: str, dispatch: Dispatch, *, now: datetime) -> Lease:
    """A new epoch for the generation (QUEUED -> RUNNING, or a re-dispatch after an expired lease).

    Raises control's `LeaseHeld` (the current lease is live), `IllegalTransition` (terminal),
    `CancelRequested`, `GenerationNotFound`, and `ValueError` for a non-positive lease.
    """
    with store.transaction() as session:
        return begin_attempt(session, generation_id, dispatch, now=now)


def begin_attempt(session: Session, generation_id: str, dispatch: Dispatch, *, now: datetime) -> Lease:
    """`start_attempt` inside a lifecycle transaction (admission starts the first attempt with it)."""
    started = attempts.start_attempt(
        session, generation_id, worker_id=dispatch.worker_id, now=now, lease_for=dispatch.lease_for
    )
    if started.repeated:  # a retry whose first try committed: its watermark is open already
        return started.lease
    if started.superseded is not None:  # the generation goes on: its reservation stays
        seal_watermark(session, generation_id, started.superseded, now=now)
    open_watermark(session, generation_id, started.lease.epoch, now=now)
    return started.lease


def renew_lease(store: Store, lease: Lease, *, now: datetime, lease_for: timedelta) -> Lease:
    """Extends a live lease to `now + lease_for`; a fenced-off attempt gets control's `FencingError`."""
    with store.transaction() as session:
        return attempts.renew_lease(session, lease, now=now, lease_for=lease_for)


@dataclass(slots=True, frozen=True)
class Renewal:
    """What one round of lease renewals found (generation ids)."""

    lost: frozenset[str]  # fenced off: another party ended or replaced the attempt
    cancel_requested: frozenset[str]  # renewed, and a cancel intent is recorded (by any frontend)


def renew_leases(store: Store, leases: Iterable[Lease], *, now: datetime, lease_for: timedelta) -> Renewal:
    """Extends every live lease to `now + lease_for`, all in one transaction (one round of a
    frontend's renewals costs one commit, whatever the number of its generations)."""
    lost, cancelled = set(), set()
    with store.transaction() as session:
        for lease in leases:
            try:
                _, generation = attempts.renew_lease_of(session, lease, now=now, lease_for=lease_for)
            except ControlError:  # fenced off or gone; raised before anything is written
                lost.add(lease.generation_id)
                continue
            if generation.cancel_requested:
                cancelled.add(lease.generation_id)
    return Renewal(frozenset(lost), frozenset(cancelled))
