"""Monthly budgets, in money as the ledger keeps tokens (billing/ledger.py).

A priced request reserves its maximum cost (billing/prices.py `Rates.max_cost`) in the calendar
month (UTC) of its admission, for its tenant and for its key, each by a conditional UPDATE that
holds `reserved + spent + cost <= budget`: concurrent admissions on any number of frontends never
pass a budget together, and a budget is overrun by no more than the generations already admitted
(only one that billed more than its maximum, over several attempts, could). When the generation
ends, its maximum leaves `reserved` and its spend, derived from its sealed usage, enters `spent`.

The rows are kept for every priced request, budget or not, so a budget set mid-month counts the
month's spend before it. A free request (no price, or a zero one) touches no budget row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from sqlalchemy import String, Table, bindparam, update
from sqlalchemy.orm import Session

from billing.errors import BudgetExceeded
from billing.ledger_sql import charge_row
from billing.models import BudgetPeriod
from datastore.upsert import insert_for

NO_BUDGET = 2**62  # the bound a subject without a budget is charged against
BUDGETS = cast(Table, BudgetPeriod.__table__)


def tenant_subject(tenant_id: str) -> str:
    return f"tenant:{tenant_id}"


def key_subject(key_id: str) -> str:
    return f"key:{key_id}"


def month_start(now: datetime) -> datetime:
    """The first instant of the calendar month (UTC) holding `now`."""
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def month_end(start: datetime) -> datetime:
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


@dataclass(slots=True, frozen=True)
class Budget:
    """A subject (tenant or key) and its monthly budget in micro-USD (None: no budget)."""

    subject: str
    budget_micros: int | None


@dataclass(slots=True, frozen=True)
class MonthSpend:
    period_start: datetime
    reserved_micros: int  # maximum cost of the month's live generations
    spent_micros: int  # spend of the month's generations that ended


def charge_budgets(session: Session, budgets: list[Budget], cost_micros: int, *, now: datetime) -> datetime:
    """Reserves `cost_micros` in this month of every subject, within its budget, or raises
    `BudgetExceeded` (the caller's transaction, rolled back, undoes what passed). Returns the month."""
    period = month_start(now)
    for b in budgets:
        budget = NO_BUDGET if b.budget_micros is None else b.budget_micros
        params = {"who": b.subject, "period": period, "cost": cost_micros, "budget": budget}
        create = (
            insert_for(session, BudgetPeriod)
            .values(subject=b.subject, period_start=period, reserved_micros=0, spent_micros=0)
            .on_conflict_do_nothing(index_elements=["subject", "period_start"])
        )
        if not charge_row(session, _CHARGE, params, lambda create=create: create):  # type: ignore[misc]
            spend = month_spend(session, b.subject, now=now)
            raise BudgetExceeded(
                b.subject,
                budget,
                spend.spent_micros,
                spend.reserved_micros,
                cost_micros,
                month_end(period),
            )
    return period


def settle_budgets(
    session: Session, subjects: list[str], period: datetime, *, reserved_micros: int, spent_micros: int
) -> None:
    """A generation of `period` ended: its maximum cost leaves `reserved`, its spend enters `spent`."""
    params = {"who": subjects, "period": period, "held": reserved_micros, "billed": spent_micros}
    session.connection().execute(_SETTLE, params)


def month_spend(session: Session, subject: str, *, now: datetime) -> MonthSpend:
    """The subject's money in the month holding `now`."""
    period = month_start(now)
    row = session.get(BudgetPeriod, (subject, period), populate_existing=True)
    return MonthSpend(period, row.reserved_micros if row else 0, row.spent_micros if row else 0)


# built once: every priced admission runs the first, every priced generation's end the second
_CHARGE = (
    update(BUDGETS)
    .where(
        BUDGETS.c.subject == bindparam("who", type_=String()),
        BUDGETS.c.period_start == bindparam("period", type_=BUDGETS.c.period_start.type),
        BUDGETS.c.reserved_micros + BUDGETS.c.spent_micros + bindparam("cost") <= bindparam("budget"),
    )
    .values(reserved_micros=BUDGETS.c.reserved_micros + bindparam("cost"))
)
_SETTLE = (
    update(BUDGETS)
    .where(
        BUDGETS.c.subject.in_(bindparam("who", expanding=True)),
        BUDGETS.c.period_start == bindparam("period", type_=BUDGETS.c.period_start.type),
    )
    .values(
        reserved_micros=BUDGETS.c.reserved_micros - bindparam("held"),
        spent_micros=BUDGETS.c.spent_micros + bindparam("billed"),
    )
)
