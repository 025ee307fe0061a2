"""Sealing an attempt's bill at terminalization (docs/design.md §4), in the caller's transaction.

The watermark of (generation_id, epoch) is frozen: its billable counts are the attempt's final bill,
and later reports raise only the observed counts (the operator's estimate). Ending the attempt itself
is control's; releasing the tenant reservation is `ledger.release_reservation`; the lifecycle layer
runs all three in one transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import String, Table, bindparam, func, update
from sqlalchemy.orm import Session

from billing.models import Watermark
from billing.usage import WatermarkView, view


def seal_watermark(session: Session, generation_id: str, epoch: int, *, now: datetime) -> WatermarkView:
    """Freezes the attempt's watermark (a sealed one keeps its seal time); `LookupError` if the attempt
    has no watermark."""
    watermark = (
        session.connection()
        .execute(_SEAL, {"generation": generation_id, "attempt": epoch, "now": now})
        .one_or_none()
    )
    if watermark is None:
        raise LookupError(f"attempt {generation_id}/{epoch} has no watermark")
    return view(watermark)


_TABLE = cast(Table, Watermark.__table__)
# One statement, built once: it takes the row's lock as a SELECT ... FOR UPDATE would, and a sealed
# watermark keeps its seal time
_SEAL = (
    update(_TABLE)
    .where(
        _TABLE.c.generation_id == bindparam("generation", type_=String()),
        _TABLE.c.epoch == bindparam("attempt"),
    )
    .values(sealed_at=func.coalesce(_TABLE.c.sealed_at, bindparam("now", type_=_TABLE.c.sealed_at.type)))
    .returning(*_TABLE.c)
)
