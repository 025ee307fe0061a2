"""Sealing an attempt's bill at terminalization (DESIGN §4), in the caller's transaction.

The watermark of (generation_id, epoch) is frozen: its billable counts are the attempt's final bill,
and later reports raise only the observed counts (the operator's estimate). Ending the attempt itself
is control's; releasing the tenant reservation is `ledger.release_reservation`; the lifecycle layer
runs all three in one transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, update
from sqlalchemy.orm import Session

from billing.models import Watermark
from billing.usage import WatermarkView, view


def seal_watermark(session: Session, generation_id: str, epoch: int, *, now: datetime) -> WatermarkView:
    """Freezes the attempt's watermark (a sealed one keeps its seal time); `LookupError` if the attempt
    has no watermark."""
    watermark = session.scalars(  # one statement: it takes the row's lock, as FOR UPDATE did
        update(Watermark)
        .where(Watermark.generation_id == generation_id, Watermark.epoch == epoch)
        .values(sealed_at=func.coalesce(Watermark.sealed_at, now))
        .returning(Watermark),
        execution_options={"populate_existing": True, "synchronize_session": False},
    ).one_or_none()
    if watermark is None:
        raise LookupError(f"attempt {generation_id}/{epoch} has no watermark")
    return view(watermark)
