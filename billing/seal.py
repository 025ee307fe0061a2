"""Sealing an attempt at terminalization (DESIGN §4), in the caller's transaction:

1. the attempt's end, outcome and terminal reason;
2. its billable watermark, frozen as the final bill (later reports raise only the observed counts);
3. if the generation is now terminal, the release of its unused tenant reservation.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from billing.ledger import release_reservation
from billing.models import Watermark
from billing.usage import WatermarkView, view
from control.models import Attempt, Generation
from control.states import GenerationState


def seal_attempt(
    session: Session,
    generation: Generation,
    attempt: Attempt,
    *,
    outcome: GenerationState,
    reason: str,
    now: datetime,
) -> WatermarkView:
    """Ends `attempt` and freezes its bill. The caller holds the generation's row lock and has
    already moved the generation to its new state; an ended attempt is left as it is."""
    if attempt.ended_at is None:
        attempt.ended_at = now
        attempt.outcome = outcome
        attempt.terminal_reason = reason
    watermark = session.get(
        Watermark, (attempt.generation_id, attempt.epoch), with_for_update=True, populate_existing=True
    )
    if watermark is None:
        raise LookupError(f"attempt {attempt.generation_id}/{attempt.epoch} has no watermark")
    if watermark.sealed_at is None:
        watermark.sealed_at = now
    session.flush()
    if generation.state.terminal:
        release_reservation(session, generation, now=now)
    return view(watermark)
