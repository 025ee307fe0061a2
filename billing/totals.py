"""What a generation was billed: its attempts' billable watermarks, summed, and whether that is final.

`total` is the SQL sum the usage reads share (0 for no rows, optionally over a filter).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, SQLColumnExpression, String, bindparam, case, func, select
from sqlalchemy.orm import Session

from billing.models import Watermark
from billing.usage import UsageCounts


@dataclass(slots=True, frozen=True)
class GenerationUsage:
    generation_id: str
    billed: UsageCounts  # summed over attempts
    final: bool  # every attempt is sealed: this is the final bill


def generation_usage(session: Session, generation_id: str) -> GenerationUsage:
    row = session.connection().execute(_USAGE, {"generation": generation_id}).one()
    i, o, c, attempts, sealed = (int(v) for v in row)
    return GenerationUsage(generation_id, UsageCounts(i, o, c), final=attempts > 0 and sealed == attempts)


def total(value: SQLColumnExpression[int], *, where: ColumnElement[bool] | None = None) -> ColumnElement[int]:
    """SUM(value) [over rows matching `where`], 0 for no rows."""
    if where is not None:
        value = case((where, value), else_=0)
    return func.coalesce(func.sum(value), 0)


_USAGE = select(  # built once: every seal and GetGeneration reads it
    total(Watermark.input_tokens),
    total(Watermark.output_tokens),
    total(Watermark.cached_input_tokens),
    func.count(),
    func.count(Watermark.sealed_at),
).where(Watermark.generation_id == bindparam("generation", type_=String()))
