"""Cancel intent, persisted before anything else acts on it (docs/design.md §4).

The frontend then drops a QUEUED generation (`termination.finish_queued`) or tells the worker to stop
a RUNNING one, whose attempt ends CANCELED through `termination.finish_attempt`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from control.generations import get_generation, lock_generation
from control.models import Generation


@dataclass(slots=True, frozen=True)
class CancelOutcome:
    generation: Generation
    already_terminal: bool  # True: nothing to cancel; `generation.state` is its terminal state
    first_request: bool  # True: this call recorded the intent (False on repeats)


def request_cancel(session: Session, tenant_id: str, generation_id: str, *, now: datetime) -> CancelOutcome:
    """Records the tenant's cancel intent; idempotent. `GenerationNotFound` for another tenant's id."""
    get_generation(session, tenant_id, generation_id)
    generation = lock_generation(session, generation_id)
    if generation.state.terminal:
        return CancelOutcome(generation, already_terminal=True, first_request=False)
    if generation.cancel_requested:
        return CancelOutcome(generation, already_terminal=False, first_request=False)
    generation.cancel_requested = True
    generation.cancel_requested_at = now
    generation.updated_at = now
    return CancelOutcome(generation, already_terminal=False, first_request=True)
