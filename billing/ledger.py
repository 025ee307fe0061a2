"""The tenant ledger: admission reserves (prompt + max output) tokens, the seal releases them.

At admission, in the caller's transaction (the lifecycle's, which also creates the generation):
- live load: one more concurrent generation, and its reserved tokens, within the tenant's
  `max_concurrent_generations` and `max_queued_tokens`;
- rate budget: the prompt tokens and max_output_tokens are charged to the current fixed window,
  within `input_tokens_per_minute` / `output_tokens_per_minute` scaled to the window length.
At the seal of the generation's last attempt the live load is released and the unused part of the
reservation (reserved minus billed) is refunded to the window it was charged to.
Counters change only by conditional UPDATEs, so concurrent admissions never overshoot a quota.
The ledger works on plain values: a `Charge` (what one generation reserves) and the tenant's
`TenantLimits`, read by the caller from wherever tenants are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Executable, Update
from sqlalchemy.orm import Session

from billing import ledger_sql as sql
from billing.errors import QuotaExceeded, QuotaKind
from billing.models import RateWindow, Reservation, TenantLedger
from billing.totals import generation_usage
from datastore.upsert import insert_for

RATE_WINDOW = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True, frozen=True)
class TenantLimits:
    """A tenant's admission quotas (docs/design.md §9 `[[tenants]]`)."""

    max_concurrent_generations: int  # live (non-terminal) generations
    max_queued_tokens: int  # reserved (prompt + max output) tokens of live generations
    input_tokens_per_minute: int  # prompt tokens admitted per minute
    output_tokens_per_minute: int  # max_output_tokens admitted per minute


@dataclass(slots=True, frozen=True)
class Charge:
    """What one generation reserves from its tenant at admission, in tokens."""

    generation_id: str
    tenant_id: str
    input_tokens: int  # the prompt after the exact template
    output_tokens: int  # max_output_tokens

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(slots=True, frozen=True)
class TenantLoad:
    active_generations: int
    reserved_tokens: int


@dataclass(slots=True, frozen=True)
class RateUsage:
    window_start: datetime
    input_tokens: int  # charged in [window_start, window_start + window)
    output_tokens: int


def window_start(now: datetime, window: timedelta = RATE_WINDOW) -> datetime:
    """The start of the fixed window holding `now` (windows are aligned to the Unix epoch)."""
    return _EPOCH + ((now - _EPOCH) // window) * window


def reserve(
    session: Session,
    charge: Charge,
    limits: TenantLimits,
    *,
    now: datetime,
    window: timedelta = RATE_WINDOW,
    created_here: bool = False,
) -> Reserved:
    """Reserves `charge` within `limits`, or raises `QuotaExceeded` having changed nothing.
    Idempotent: a generation already reserved returns its reservation.

    `created_here`: the caller created the generation in this transaction and rolls all of it back
    on a refusal (admission does): nothing can be reserved for it yet, and no savepoint is needed,
    which saves three statements."""
    if not created_here and (existing := session.get(Reservation, charge.generation_id)) is not None:
        return Reserved(existing.generation_id, existing.window_start, existing.reserved_at)
    start = window_start(now, window)
    with nullcontext() if created_here else session.begin_nested():
        _charge_load(session, charge, limits)
        _charge_rate(session, charge, limits, start, now, window)
        params = {"generation": charge.generation_id, "tenant": charge.tenant_id, "start": start, "now": now}
        session.connection().execute(sql.RESERVE, params)
    return Reserved(charge.generation_id, start, now)


@dataclass(slots=True, frozen=True)
class Reserved:
    """A generation's reservation: the rate window it was charged to, and when."""

    generation_id: str
    window_start: datetime
    reserved_at: datetime


@dataclass(slots=True, frozen=True)
class Released:
    """A generation's released reservation: when, and what was refunded to its window."""

    released_at: datetime
    refunded_input_tokens: int
    refunded_output_tokens: int


def release_reservation(session: Session, charge: Charge, *, now: datetime) -> Released | None:
    """Releases the reservation of `charge` (a generation that has ended) once, refunding what its
    watermarks did not bill; later calls answer it as released then, and an unreserved generation
    None.

    The reservation row is released by one conditional UPDATE (RETURNING it), which also takes its
    lock: of two concurrent releases, the second matches nothing once the first commits."""
    billed = generation_usage(session, charge.generation_id).billed
    refund_in = max(charge.input_tokens - billed.input_tokens, 0)
    refund_out = max(charge.output_tokens - billed.output_tokens, 0)
    params = {
        "generation": charge.generation_id,
        "now": now,
        "refund_in": refund_in,
        "refund_out": refund_out,
    }
    connection = session.connection()
    row = connection.execute(sql.RELEASE, params).one_or_none()
    if row is None:  # none, or released before: as it was
        before = connection.execute(sql.RELEASED, params).one_or_none()
        return None if before is None else Released(*before)
    tenant, start = row[0], row[1]
    connection.execute(sql.UNLOAD, {"tenant": tenant, "tokens": charge.tokens})
    connection.execute(sql.REFUND, {"tenant": tenant, "start": start} | params)
    return Released(*row[2:])


def tenant_load(session: Session, tenant_id: str) -> TenantLoad:
    ledger = session.get(TenantLedger, tenant_id, populate_existing=True)
    if ledger is None:
        return TenantLoad(0, 0)
    return TenantLoad(ledger.active_generations, ledger.reserved_tokens)


def rate_usage(
    session: Session, tenant_id: str, *, now: datetime, window: timedelta = RATE_WINDOW
) -> RateUsage:
    start = window_start(now, window)
    row = session.get(RateWindow, (tenant_id, start), populate_existing=True)
    return RateUsage(start, row.input_tokens if row else 0, row.output_tokens if row else 0)


def _charged(
    session: Session, charge_row: Update, params: dict[str, Any], create_row: Callable[[], Executable]
) -> bool:
    """Whether the conditional UPDATE `charge_row` charged its counter row. The row usually exists
    (a tenant's ledger; a window's after its first admission): one statement. Where the UPDATE
    matched nothing, the row is created if missing (a concurrent creator's insert is waited for)
    and the UPDATE tried once more; a refusal still matches nothing."""
    connection = session.connection()
    if connection.execute(charge_row, params).rowcount == 1:
        return True
    session.execute(create_row())
    return connection.execute(charge_row, params).rowcount == 1


def _charge_load(session: Session, charge: Charge, limits: TenantLimits) -> None:
    tenant_id, tokens = charge.tenant_id, charge.tokens
    params = {
        "tenant": tenant_id,
        "max_live": limits.max_concurrent_generations,
        "tokens": tokens,
        "max_tokens": limits.max_queued_tokens,
    }
    create_row = lambda: (  # noqa: E731
        insert_for(session, TenantLedger)
        .values(tenant_id=tenant_id, active_generations=0, reserved_tokens=0)
        .on_conflict_do_nothing(index_elements=["tenant_id"])
    )
    if _charged(session, sql.CHARGE_LOAD, params, create_row):
        return
    load = tenant_load(session, tenant_id)
    if load.active_generations >= limits.max_concurrent_generations:
        raise QuotaExceeded(
            tenant_id,
            QuotaKind.CONCURRENT_GENERATIONS,
            limits.max_concurrent_generations,
            load.active_generations,
            1,
            None,
        )
    raise QuotaExceeded(
        tenant_id, QuotaKind.QUEUED_TOKENS, limits.max_queued_tokens, load.reserved_tokens, tokens, None
    )


def _charge_rate(
    session: Session,
    charge: Charge,
    limits: TenantLimits,
    start: datetime,
    now: datetime,
    window: timedelta,
) -> None:
    scale = window / timedelta(minutes=1)
    limit_in = int(limits.input_tokens_per_minute * scale)
    limit_out = int(limits.output_tokens_per_minute * scale)
    tenant_id, want_in, want_out = charge.tenant_id, charge.input_tokens, charge.output_tokens
    params = {
        "tenant": tenant_id,
        "start": start,
        "want_in": want_in,
        "want_out": want_out,
        "limit_in": limit_in,
        "limit_out": limit_out,
    }
    create_row = lambda: (  # noqa: E731
        insert_for(session, RateWindow)
        .values(tenant_id=tenant_id, window_start=start, input_tokens=0, output_tokens=0)
        .on_conflict_do_nothing(index_elements=["tenant_id", "window_start"])
    )
    if _charged(session, sql.CHARGE_RATE, params, create_row):
        return
    used = rate_usage(session, tenant_id, now=now, window=window)
    if used.input_tokens + want_in > limit_in:
        kind, limit, in_use, wanted = QuotaKind.INPUT_TOKENS_PER_MINUTE, limit_in, used.input_tokens, want_in
    else:
        kind, limit, in_use, wanted = (
            QuotaKind.OUTPUT_TOKENS_PER_MINUTE,
            limit_out,
            used.output_tokens,
            want_out,
        )
    retry_after = start + window - now if wanted <= limit else None
    raise QuotaExceeded(tenant_id, kind, limit, in_use, wanted, retry_after)
