"""Usage queries: per tenant and time window (the Usage service), and per generation.

Usage is attributed to the window holding the attempt's start. Recorded counts are the billable
watermarks (final once sealed). The unbilled estimate is what interrupted attempts reported only
after their seal: the crash tail, an internal cost never charged to the tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, SQLColumnExpression, case, func, select
from sqlalchemy.orm import Session

from billing.models import Watermark
from billing.usage import UsageCounts
from control.models import Attempt, Generation
from control.states import GenerationState


@dataclass(slots=True, frozen=True)
class TenantUsage:
    tenant_id: str
    start: datetime  # inclusive
    end: datetime  # exclusive
    recorded: UsageCounts  # billable watermarks of every attempt started in the window
    interrupted: UsageCounts  # the part of `recorded` from interrupted attempts
    unbilled: UsageCounts  # estimated crash tail of interrupted attempts (observed - billable)
    generations: int  # distinct generations with an attempt started in the window


@dataclass(slots=True, frozen=True)
class GenerationUsage:
    generation_id: str
    billed: UsageCounts  # summed over attempts
    final: bool  # every attempt is sealed: this is the final bill


def usage_by_tenant(session: Session, tenant_id: str, *, start: datetime, end: datetime) -> TenantUsage:
    if end <= start:
        raise ValueError("the window must end after it starts")
    w = Watermark
    interrupted = Attempt.outcome == GenerationState.INTERRUPTED
    sealed_interrupted = interrupted & w.sealed_at.is_not(None)
    columns = (w.input_tokens, w.output_tokens, w.cached_input_tokens)
    observed = (w.observed_input_tokens, w.observed_output_tokens, w.observed_cached_input_tokens)
    row = session.execute(
        select(
            *(_sum(c) for c in columns),
            *(_sum(c, where=interrupted) for c in columns),
            *(
                _sum(o - c, where=sealed_interrupted & (o > c))
                for o, c in zip(observed, columns, strict=True)
            ),
            func.count(func.distinct(Generation.id)),
        )
        .select_from(w)
        .join(Attempt, (Attempt.generation_id == w.generation_id) & (Attempt.epoch == w.epoch))
        .join(Generation, Generation.id == w.generation_id)
        .where(Generation.tenant_id == tenant_id, Attempt.started_at >= start, Attempt.started_at < end)
    ).one()
    n = [int(v) for v in row]
    return TenantUsage(
        tenant_id=tenant_id,
        start=start,
        end=end,
        recorded=UsageCounts(*n[0:3]),
        interrupted=UsageCounts(*n[3:6]),
        unbilled=UsageCounts(*n[6:9]),
        generations=n[9],
    )


def generation_usage(session: Session, generation_id: str) -> GenerationUsage:
    row = session.execute(
        select(
            _sum(Watermark.input_tokens),
            _sum(Watermark.output_tokens),
            _sum(Watermark.cached_input_tokens),
            func.count(),
            func.count(Watermark.sealed_at),
        ).where(Watermark.generation_id == generation_id)
    ).one()
    i, o, c, attempts, sealed = (int(v) for v in row)
    return GenerationUsage(generation_id, UsageCounts(i, o, c), final=attempts > 0 and sealed == attempts)


def _sum(value: SQLColumnExpression[int], *, where: ColumnElement[bool] | None = None) -> ColumnElement[int]:
    """SUM(value) [over rows matching `where`], 0 for no rows."""
    if where is not None:
        value = case((where, value), else_=0)
    return func.coalesce(func.sum(value), 0)
