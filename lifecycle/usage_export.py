"""The usage export: billed usage by tenant, key, model version (and adapter) and day (or hour), for
invoices. Only sealed watermarks, the final bills, are exported: a generation still running appears
once it has ended. Tokens are attributed, as GetUsage's, to the period holding each attempt's
start, and spend is each attempt's sealed watermark at its generation's pinned price, so the rows'
sums are exactly the sealed watermarks' and the ledger's spend."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import BigInteger, ColumnElement, SQLColumnExpression, cast, func, literal_column, select
from sqlalchemy.orm import Session

from billing.models import Reservation, Watermark
from billing.prices import attempt_cost
from billing.totals import total
from control.models import Attempt, Generation, ModelVersion
from datastore.store import Store
from lifecycle.reads import PINNED

BUCKETS = {"day": 86_400, "hour": 3_600}  # period name -> its length in seconds (UTC, epoch-aligned)


@dataclass(slots=True, frozen=True)
class UsageRow:
    tenant_id: str
    api_key_id: str  # "" for generations admitted before keys had ids
    model_version_id: str
    adapter: str  # "" for base weights
    period_start: datetime  # the day (or hour) of its attempts' starts, UTC
    input_tokens: int  # billed prompt tokens, those from the prefix cache included
    cached_input_tokens: int
    output_tokens: int
    requests: int  # distinct generations
    spent_micros: int  # micro-USD


def usage_export(
    store: Store, *, start: datetime, end: datetime, tenant_id: str = "", bucket: str = "day"
) -> list[UsageRow]:
    """The sealed usage of attempts started in [start, end), of one tenant or of all, one row per
    tenant, key, version, adapter and period, ordered by period, then tenant, key, version."""
    if end <= start:
        raise ValueError("the window must end after it starts")
    seconds = BUCKETS[bucket]
    w = Watermark
    with store.transaction() as session:
        # the period's number: an inline literal, so SELECT and GROUP BY name the same expression
        period = _epoch_seconds(session)(Attempt.started_at) // literal_column(str(seconds))
        key, adapter = func.coalesce(Generation.api_key_id, ""), func.coalesce(ModelVersion.adapter, "")
        groups = (Generation.tenant_id, key, Generation.model_version_id, adapter, period)
        query = (
            select(
                *groups,
                total(w.input_tokens),
                total(w.cached_input_tokens),
                total(w.output_tokens),
                func.count(func.distinct(Generation.id)),
                total(attempt_cost(w.input_tokens, w.cached_input_tokens, w.output_tokens, PINNED)),
            )
            .select_from(w)
            .join(Attempt, (Attempt.generation_id == w.generation_id) & (Attempt.epoch == w.epoch))
            .join(Generation, Generation.id == w.generation_id)
            .join(ModelVersion, ModelVersion.id == Generation.model_version_id)
            .outerjoin(Reservation, Reservation.generation_id == w.generation_id)
            .where(w.sealed_at.is_not(None), Attempt.started_at >= start, Attempt.started_at < end)
            .group_by(*groups)
            .order_by(period, Generation.tenant_id, key, Generation.model_version_id, adapter)
        )
        if tenant_id:
            query = query.where(Generation.tenant_id == tenant_id)
        rows = session.execute(query).all()
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return [
        UsageRow(t, k, v, a, epoch + timedelta(seconds=int(p) * seconds), *(int(n) for n in counts))
        for t, k, v, a, p, *counts in rows
    ]


def _epoch_seconds(session: Session) -> Callable[[SQLColumnExpression[datetime]], ColumnElement[int]]:
    """Whole seconds since the Unix epoch of a stored time, in the session's dialect."""
    if session.get_bind().dialect.name == "sqlite":  # naive UTC text
        return lambda t: cast(func.strftime("%s", t), BigInteger)
    return lambda t: cast(func.floor(func.extract("epoch", t)), BigInteger)
