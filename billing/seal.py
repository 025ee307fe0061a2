"""Sealing an attempt's bill at terminalization (DESIGN §4), in the caller's transaction.

The watermark of (generation_id, epoch) is frozen: its billable counts are the attempt's final bill,
and later reports raise only the observed counts (the operator's estimate). Ending the attempt itself
is control's; releasing the tenant reservation is `ledger.release_reservation`; the lifecycle layer
runs all three in one transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from billing.models import Watermark
from billing.usage import WatermarkView, view


def seal_watermark(session: Session, generation_id: str, epoch: int, *, now: datetime) -> WatermarkView:
    """Freezes the attempt's watermark (a sealed one keeps its seal time); `LookupError` if the attempt
    has no watermark."""
    watermark = session.get(Watermark, (generation_id, epoch), with_for_update=True, populate_existing=True)
    if watermark is None:
        raise LookupError(f"attempt {generation_id}/{epoch} has no watermark")
    if watermark.sealed_at is None:
        watermark.sealed_at = now
    session.flush()
    return view(watermark)
