"""Reads that join control and billing: a generation with what it was billed, and a tenant's usage
over a time window (the Usage service).

Tenant usage is attributed to the window holding each attempt's start. Recorded counts are the
billable watermarks (final once sealed), and spend is each attempt's watermark at its generation's
pinned price (billing/prices.py `attempt_cost`: what the ledger and the usage export sum too). The
unbilled estimate is what interrupted attempts reported only after their seal: the crash tail, an
internal cost never charged to the tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from billing.models import Reservation, Watermark
from billing.prices import attempt_cost
from billing.totals import GenerationUsage, generation_usage, total
from billing.usage import UsageCounts
from control import generations
from control.errors import GenerationNotFound
from control.models import Attempt, Generation
from control.states import GenerationState
from datastore.store import Store


@dataclass(slots=True, frozen=True)
class GenerationRecord:
    """A generation as recorded, with its bill."""

    generation_id: str
    request_id: str
    state: GenerationState
    model_version_id: str  # the pinned immutable version
    terminal_reason: str | None  # e.g. OUTPUT_LIMIT, SLOW_CONSUMER; None until terminal
    epoch: int | None  # the current attempt's; None before the first
    usage: GenerationUsage  # billed, summed over its attempts


@dataclass(slots=True, frozen=True)
class TenantUsage:
    tenant_id: str
    start: datetime  # inclusive
    end: datetime  # exclusive
    recorded: UsageCounts  # billable watermarks of every attempt started in the window
    interrupted: UsageCounts  # the part of `recorded` from interrupted attempts
    unbilled: UsageCounts  # estimated crash tail of interrupted attempts (observed - billable)
    generations: int  # distinct generations with an attempt started in the window
    spent_micros: int = 0  # micro-USD: `recorded` at each generation's pinned price


def get_generation(store: Store, tenant_id: str, generation_id: str) -> GenerationRecord:
    """The tenant's generation; `GenerationNotFound` for unknown ids and other tenants' generations."""
    with store.transaction() as session:
        return _record(session, generations.get_generation(session, tenant_id, generation_id))


def get_generation_by_request(store: Store, tenant_id: str, request_id: str) -> GenerationRecord:
    """The tenant's generation recorded under `request_id`; else `GenerationNotFound(request_id)`."""
    with store.transaction() as session:
        generation = generations.find_by_request_id(session, tenant_id, request_id)
        if generation is None:
            raise GenerationNotFound(request_id)
        return _record(session, generation)


def usage_by_tenant(store: Store, tenant_id: str, *, start: datetime, end: datetime) -> TenantUsage:
    if end <= start:
        raise ValueError("the window must end after it starts")
    w = Watermark
    interrupted = Attempt.outcome == GenerationState.INTERRUPTED
    sealed_interrupted = interrupted & w.sealed_at.is_not(None)
    columns = (w.input_tokens, w.output_tokens, w.cached_input_tokens)
    observed = (w.observed_input_tokens, w.observed_output_tokens, w.observed_cached_input_tokens)
    query = (
        select(
            *(total(c) for c in columns),
            *(total(c, where=interrupted) for c in columns),
            *(
                total(o - c, where=sealed_interrupted & (o > c))
                for o, c in zip(observed, columns, strict=True)
            ),
            func.count(func.distinct(Generation.id)),
            total(attempt_cost(w.input_tokens, w.cached_input_tokens, w.output_tokens, PINNED)),
        )
        .select_from(w)
        .join(Attempt, (Attempt.generation_id == w.generation_id) & (Attempt.epoch == w.epoch))
        .join(Generation, Generation.id == w.generation_id)
        .outerjoin(Reservation, Reservation.generation_id == w.generation_id)
        .where(Generation.tenant_id == tenant_id, Attempt.started_at >= start, Attempt.started_at < end)
    )
    with store.transaction() as session:
        n = [int(v) for v in session.execute(query).one()]
    return TenantUsage(
        tenant_id=tenant_id,
        start=start,
        end=end,
        recorded=UsageCounts(*n[0:3]),
        interrupted=UsageCounts(*n[3:6]),
        unbilled=UsageCounts(*n[6:9]),
        generations=n[9],
        spent_micros=n[10],
    )


# the price pinned at admission (no reservation: free)
PINNED = (
    func.coalesce(Reservation.input_per_mtok, 0),
    func.coalesce(Reservation.cached_input_per_mtok, 0),
    func.coalesce(Reservation.output_per_mtok, 0),
)


def _record(session: Session, g: Generation) -> GenerationRecord:
    return GenerationRecord(
        generation_id=g.id,
        request_id=g.request_id,
        state=g.state,
        model_version_id=g.model_version_id,
        terminal_reason=g.terminal_reason,
        epoch=g.current_epoch,
        usage=generation_usage(session, g.id),
    )
