"""The tenant ledger: admission reserves (prompt + max output) tokens, the seal releases them.

At admission, in the caller's transaction (the lifecycle's, which also creates the generation):
- live load: one more concurrent generation, and its reserved tokens, within the tenant's
  `max_concurrent_generations` and `max_queued_tokens`;
- rate budget: the prompt tokens and max_output_tokens are charged to the current fixed window,
  within `input_tokens_per_minute` / `output_tokens_per_minute` scaled to the window length.
- its key's own rate window, when the key has rate limits (beside the tenant's);
- money, when the request is priced: its maximum cost in this month's budget rows of the tenant and
  the key (billing/budgets.py).
At the seal of the generation's last attempt the live load is released, the unused part of the
reservation (reserved minus billed) is refunded to the window(s) it was charged to, and its spend
(its sealed usage at the price pinned here) replaces its maximum cost in the month's budgets.
Counters change only by conditional UPDATEs, so concurrent admissions never overshoot a quota.
The ledger works on plain values: a `Charge` (what one generation reserves) and the tenant's
`TenantLimits`, read by the caller from wherever tenants are kept.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from billing import ledger_sql as sql
from billing.budgets import Budget, charge_budgets, key_subject, settle_budgets, tenant_subject
from billing.errors import QuotaExceeded, QuotaKind
from billing.models import Reservation, TenantLedger
from billing.prices import FREE, Rates
from billing.rate_windows import RATE_WINDOW, Counter, RateUsage, charge_window, rate_usage, window_start
from billing.totals import generation_usage
from datastore.upsert import insert_for

__all__ = [
    "RATE_WINDOW",
    "Charge",
    "KeyLimits",
    "RateUsage",
    "TenantLimits",
    "rate_usage",
    "reserve",
    "window_start",
]


@dataclass(slots=True, frozen=True)
class TenantLimits:
    """A tenant's admission quotas (docs/design.md §9 `[[tenants]]`)."""

    max_concurrent_generations: int  # live (non-terminal) generations
    max_queued_tokens: int  # reserved (prompt + max output) tokens of live generations
    input_tokens_per_minute: int  # prompt tokens admitted per minute
    output_tokens_per_minute: int  # max_output_tokens admitted per minute
    monthly_budget_micros: int | None = None  # micro-USD per calendar month; None: no budget


@dataclass(slots=True, frozen=True)
class KeyLimits:
    """An API key's own limits, beside its tenant's (None: none of that kind)."""

    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    monthly_budget_micros: int | None = None

    @property
    def rated(self) -> bool:
        return self.input_tokens_per_minute is not None or self.output_tokens_per_minute is not None


@dataclass(slots=True, frozen=True)
class Charge:
    """What one generation reserves at admission: tokens from its tenant (and key), and at a price,
    its maximum cost from their monthly budgets."""

    generation_id: str
    tenant_id: str
    input_tokens: int  # the prompt after the exact template
    output_tokens: int  # max_output_tokens
    key_id: str | None = None  # the API key that admits it
    rates: Rates = FREE  # the price in effect at admission, pinned for its bill

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_micros(self) -> int:
        return self.rates.max_cost(self.input_tokens, self.output_tokens)


@dataclass(slots=True, frozen=True)
class TenantLoad:
    active_generations: int
    reserved_tokens: int


def reserve(
    session: Session,
    charge: Charge,
    limits: TenantLimits,
    *,
    now: datetime,
    key_limits: KeyLimits | None = None,
    window: timedelta = RATE_WINDOW,
    created_here: bool = False,
) -> Reserved:
    """Reserves `charge` within `limits` (and its key's `key_limits`), or raises `QuotaExceeded` or
    `BudgetExceeded` having changed nothing. Idempotent: a generation already reserved returns its
    reservation.

    `created_here`: the caller created the generation in this transaction and rolls all of it back
    on a refusal (admission does): nothing can be reserved for it yet, and no savepoint is needed,
    which saves three statements."""
    if not created_here and (existing := session.get(Reservation, charge.generation_id)) is not None:
        return Reserved(existing.generation_id, existing.window_start, existing.reserved_at)
    start = window_start(now, window)
    key = key_limits or KeyLimits()
    key_rated = charge.key_id is not None and key.rated
    with nullcontext() if created_here else session.begin_nested():
        _charge_load(session, charge, limits)
        per_minute = (limits.input_tokens_per_minute, limits.output_tokens_per_minute)
        tokens = (charge.input_tokens, charge.output_tokens)
        charge_window(session, Counter(charge.tenant_id), tokens, per_minute, start, now, window)
        if key_rated:
            per_key = (key.input_tokens_per_minute, key.output_tokens_per_minute)
            counter = Counter(charge.tenant_id, charge.key_id)
            charge_window(session, counter, tokens, per_key, start, now, window)
        period = None
        if charge.cost_micros > 0:
            budgets = [Budget(tenant_subject(charge.tenant_id), limits.monthly_budget_micros)]
            if charge.key_id is not None:
                budgets.append(Budget(key_subject(charge.key_id), key.monthly_budget_micros))
            period = charge_budgets(session, budgets, charge.cost_micros, now=now)
        r = charge.rates
        params = {
            "generation": charge.generation_id,
            "tenant": charge.tenant_id,
            "start": start,
            "now": now,
            "key": charge.key_id,
            "key_rated": key_rated,
            "rate_in": r.input_per_mtok,
            "rate_cached": r.cached_input_per_mtok,
            "rate_out": r.output_per_mtok,
            "period": period,
            "cost": charge.cost_micros if period is not None else 0,
        }
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
    tenant, start, key_id, key_rated, period, reserved_micros, spent_micros = row[:7]
    connection.execute(sql.UNLOAD, {"tenant": tenant, "tokens": charge.tokens})
    connection.execute(sql.REFUND, {"tenant": tenant, "start": start} | params)
    if key_rated:
        connection.execute(sql.REFUND_KEY, {"key": key_id, "start": start} | params)
    if period is not None:
        subjects = [tenant_subject(tenant)] + ([key_subject(key_id)] if key_id is not None else [])
        settle_budgets(session, subjects, period, reserved_micros=reserved_micros, spent_micros=spent_micros)
    return Released(*row[7:])


def tenant_load(session: Session, tenant_id: str) -> TenantLoad:
    ledger = session.get(TenantLedger, tenant_id, populate_existing=True)
    if ledger is None:
        return TenantLoad(0, 0)
    return TenantLoad(ledger.active_generations, ledger.reserved_tokens)


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
    if sql.charge_row(session, sql.CHARGE_LOAD, params, create_row):
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
