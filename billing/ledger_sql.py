"""The ledger's statements (billing/ledger.py), built once with bind parameters: admission and
every generation's end run them, and a statement built per call costs more Python than its SQL.

Parameter names never equal a column name of the table updated: SQLAlchemy would take a parameter
of that name as a value to SET."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import Executable, String, Table, Update, bindparam, func, insert, select, update
from sqlalchemy.orm import Session

from billing.models import KeyRateWindow, RateWindow, Reservation, TenantLedger, Watermark
from billing.prices import attempt_cost

LEDGER, RATE = cast(Table, TenantLedger.__table__), cast(Table, RateWindow.__table__)
KEY_RATE = cast(Table, KeyRateWindow.__table__)


def charge_row(
    session: Session, charge: Update, params: dict[str, Any], create_row: Callable[[], Executable]
) -> bool:
    """Whether the conditional UPDATE `charge` charged its counter row. The row usually exists
    (a tenant's ledger; a window's or a month's after its first admission): one statement. Where the
    UPDATE matched nothing, the row is created if missing (a concurrent creator's insert is waited
    for) and the UPDATE tried once more; a refusal still matches nothing."""
    connection = session.connection()
    if connection.execute(charge, params).rowcount == 1:
        return True
    session.execute(create_row())
    return connection.execute(charge, params).rowcount == 1


# The two conditional UPDATEs, built once: admission runs them for every generation
CHARGE_LOAD = (
    update(LEDGER)
    .where(
        LEDGER.c.tenant_id == bindparam("tenant", type_=String()),
        LEDGER.c.active_generations < bindparam("max_live"),
        LEDGER.c.reserved_tokens + bindparam("tokens") <= bindparam("max_tokens"),
    )
    .values(
        active_generations=LEDGER.c.active_generations + 1,
        reserved_tokens=LEDGER.c.reserved_tokens + bindparam("tokens"),
    )
)
CHARGE_RATE = (
    update(RATE)
    .where(
        RATE.c.tenant_id == bindparam("tenant", type_=String()),
        RATE.c.window_start == bindparam("start"),
        RATE.c.input_tokens + bindparam("want_in") <= bindparam("limit_in"),
        RATE.c.output_tokens + bindparam("want_out") <= bindparam("limit_out"),
    )
    .values(
        input_tokens=RATE.c.input_tokens + bindparam("want_in"),
        output_tokens=RATE.c.output_tokens + bindparam("want_out"),
    )
)
CHARGE_KEY_RATE = (
    update(KEY_RATE)
    .where(
        KEY_RATE.c.api_key_id == bindparam("key", type_=String()),
        KEY_RATE.c.window_start == bindparam("start"),
        KEY_RATE.c.input_tokens + bindparam("want_in") <= bindparam("limit_in"),
        KEY_RATE.c.output_tokens + bindparam("want_out") <= bindparam("limit_out"),
    )
    .values(
        input_tokens=KEY_RATE.c.input_tokens + bindparam("want_in"),
        output_tokens=KEY_RATE.c.output_tokens + bindparam("want_out"),
    )
)
REFUND_KEY = (
    update(KEY_RATE)
    .where(
        KEY_RATE.c.api_key_id == bindparam("key", type_=String()),
        KEY_RATE.c.window_start == bindparam("start"),
    )
    .values(
        input_tokens=KEY_RATE.c.input_tokens - bindparam("refund_in"),
        output_tokens=KEY_RATE.c.output_tokens - bindparam("refund_out"),
    )
)
UNLOAD = (
    update(LEDGER)
    .where(LEDGER.c.tenant_id == bindparam("tenant", type_=String()))
    .values(
        active_generations=LEDGER.c.active_generations - 1,
        reserved_tokens=LEDGER.c.reserved_tokens - bindparam("tokens"),
    )
)
REFUND = (
    update(RATE)
    .where(RATE.c.tenant_id == bindparam("tenant", type_=String()), RATE.c.window_start == bindparam("start"))
    .values(
        input_tokens=RATE.c.input_tokens - bindparam("refund_in"),
        output_tokens=RATE.c.output_tokens - bindparam("refund_out"),
    )
)


RESERVATION = cast(Table, Reservation.__table__)
OUTCOME = (
    RESERVATION.c.released_at,
    RESERVATION.c.refunded_input_tokens,
    RESERVATION.c.refunded_output_tokens,
)
RESERVE = insert(RESERVATION).values(
    generation_id=bindparam("generation", type_=String()),
    tenant_id=bindparam("tenant", type_=String()),
    window_start=bindparam("start", type_=RESERVATION.c.window_start.type),
    reserved_at=bindparam("now", type_=RESERVATION.c.reserved_at.type),
    api_key_id=bindparam("key", type_=String()),
    key_rate_charged=bindparam("key_rated"),
    input_per_mtok=bindparam("rate_in"),
    cached_input_per_mtok=bindparam("rate_cached"),
    output_per_mtok=bindparam("rate_out"),
    budget_period=bindparam("period", type_=RESERVATION.c.budget_period.type),
    reserved_micros=bindparam("cost"),
)
WATERMARKS = cast(Table, Watermark.__table__)
PINNED_RATES = (
    RESERVATION.c.input_per_mtok,
    RESERVATION.c.cached_input_per_mtok,
    RESERVATION.c.output_per_mtok,
)
# the generation's spend: each attempt's sealed watermark at the pinned price (billing/prices.py)
SPENT = (
    select(
        func.coalesce(
            func.sum(
                attempt_cost(
                    WATERMARKS.c.input_tokens,
                    WATERMARKS.c.cached_input_tokens,
                    WATERMARKS.c.output_tokens,
                    PINNED_RATES,
                )
            ),
            0,
        )
    )
    .where(WATERMARKS.c.generation_id == RESERVATION.c.generation_id)
    .scalar_subquery()
)
# The release's statements, built once (every generation's end runs them)
RELEASE = (
    update(RESERVATION)
    .where(
        RESERVATION.c.generation_id == bindparam("generation", type_=String()),
        RESERVATION.c.released_at.is_(None),
    )
    .values(
        released_at=bindparam("now", type_=RESERVATION.c.released_at.type),
        refunded_input_tokens=bindparam("refund_in"),
        refunded_output_tokens=bindparam("refund_out"),
        spent_micros=SPENT,
    )
    .returning(
        RESERVATION.c.tenant_id,
        RESERVATION.c.window_start,
        RESERVATION.c.api_key_id,
        RESERVATION.c.key_rate_charged,
        RESERVATION.c.budget_period,
        RESERVATION.c.reserved_micros,
        RESERVATION.c.spent_micros,
        *OUTCOME,
    )
)
RELEASED = select(*OUTCOME).where(RESERVATION.c.generation_id == bindparam("generation", type_=String()))
