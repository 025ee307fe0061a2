"""Ending a generation: each function moves it to a terminal state through the transition table and
records the end of its attempt (time, outcome, terminal reason). Billing's side of the same moment
(sealing the attempt's watermark, releasing the tenant reservation) is the caller's: the lifecycle
layer runs both in one transaction.

- `finish_attempt`: the worker's attempt ends it (fenced: current epoch, unexpired lease).
- `interrupt_attempt`: the control plane declares the current attempt lost (worker crash, sweeper).
- `finish_queued`: a generation that never started an attempt is canceled or failed.
- `withdraw_queued`, `withdraw_unadmitted`: the platform refused it before anything ran; its record goes.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from control import generation_rows
from control.attempts import Lease, current_attempt, end_attempt, fence
from control.errors import AttemptEnded, IllegalTransition, StaleEpoch
from control.generation_rows import GenerationRow
from control.generations import lock_generation
from control.models import Generation
from control.states import GenerationState, transition

LEASE_EXPIRED = "LEASE_EXPIRED"  # terminal reason set by the sweeper
WORKER_LOST = "WORKER_LOST"  # terminal reason when the worker's stream broke


def finish_attempt(
    session: Session, lease: Lease, *, state: GenerationState, reason: str, now: datetime
) -> GenerationRow:
    """The attempt holding `lease` ends its generation in `state` (COMPLETED, CANCELED, FAILED or
    INTERRUPTED) with `reason` (e.g. OUTPUT_LIMIT). Raises a `FencingError` for a replaced or expired
    attempt, `IllegalTransition` for a non-terminal `state`."""
    if not state.terminal:
        raise IllegalTransition(lease.generation_id, str(GenerationState.RUNNING), str(state))
    generation, attempt = fence(session, lease, now=now)
    ended = generation_rows.end(session, generation, state, now=now, reason=reason)
    end_attempt(session, attempt, outcome=state, reason=reason, now=now)
    return ended


def interrupt_attempt(
    session: Session, generation_id: str, epoch: int, *, reason: str, now: datetime
) -> Generation:
    """Ends the current attempt `epoch` INTERRUPTED (and its generation, if RUNNING).

    Raises `StaleEpoch` if `epoch` is not current and `AttemptEnded` if it already ended.
    """
    generation = lock_generation(session, generation_id)
    attempt = current_attempt(session, generation.id, generation.current_epoch)
    if attempt is None or attempt.epoch != epoch:
        raise StaleEpoch(generation_id, epoch, generation.current_epoch)
    if attempt.ended_at is not None:
        raise AttemptEnded(generation_id, epoch)
    if generation.state is GenerationState.RUNNING:
        transition(generation, GenerationState.INTERRUPTED, now=now, reason=reason)
    end_attempt(session, attempt, outcome=GenerationState.INTERRUPTED, reason=reason, now=now)
    return generation


def finish_queued(
    session: Session, generation_id: str, *, state: GenerationState, reason: str, now: datetime
) -> Generation:
    """Ends a QUEUED generation (no attempt ever started) as CANCELED or FAILED. Any other state
    raises `IllegalTransition`."""
    generation = lock_generation(session, generation_id)
    if generation.state is not GenerationState.QUEUED:
        raise IllegalTransition(generation.id, str(generation.state), str(state))
    transition(generation, state, now=now, reason=reason)
    return generation


def withdraw_queued(session: Session, generation_id: str) -> Generation:
    """Deletes a QUEUED generation that no attempt ever started: the platform refused it before it
    ran (no worker had room within its tier's allowance), so it leaves no identity behind and a
    retry under the same request id is a new request. Rows that reference it (its reservation) go
    with it; release the reservation first. Any other state raises `IllegalTransition`."""
    generation = lock_generation(session, generation_id)
    if generation.state is not GenerationState.QUEUED or generation.current_epoch is not None:
        raise IllegalTransition(generation.id, str(generation.state), "WITHDRAWN")
    session.delete(generation)
    session.flush()
    return generation


def unadmitted(session: Session, lease: Lease, *, now: datetime) -> GenerationRow:
    """The locked generation whose first attempt holds `lease` and that no worker admitted (each
    refused it or was down, so nothing ran and nothing was reported), to withdraw: like a QUEUED
    one, it is to leave no identity behind, so that a retry under the same request id is a new
    request (release its reservation, then `delete_generation`). Fenced like `finish_attempt`; a
    later attempt (the generation ran before) raises `IllegalTransition`."""
    generation, _ = fence(session, lease, now=now)
    if lease.epoch != 1:
        raise IllegalTransition(generation.id, str(generation.state), "WITHDRAWN")
    return generation


def delete_generation(session: Session, generation_id: str) -> None:
    """Deletes the generation with its attempts, their watermarks and its reservation (ON DELETE
    CASCADE)."""
    session.execute(delete(Generation).where(Generation.id == generation_id))
