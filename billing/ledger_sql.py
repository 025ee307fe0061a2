"""The ledger's statements (billing/ledger.py), built once with bind parameters: admission and
every generation's end run them, and a statement built per call costs more Python than its SQL.

Parameter names never equal a column name of the table updated: SQLAlchemy would take a parameter
of that name as a value to SET."""

from __future__ import annotations

from typing import cast

from sqlalchemy import String, Table, bindparam, insert, select, update

from billing.models import RateWindow, Reservation, TenantLedger

LEDGER, RATE = cast(Table, TenantLedger.__table__), cast(Table, RateWindow.__table__)
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
    )
    .returning(RESERVATION.c.tenant_id, RESERVATION.c.window_start, *OUTCOME)
)
RELEASED = select(*OUTCOME).where(RESERVATION.c.generation_id == bindparam("generation", type_=String()))
