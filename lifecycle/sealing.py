"""The billing side of control's transitions, inside a lifecycle transaction: what a generation
charges its tenant, the tenant's limits, and the seal of an attempt control has just ended."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, bindparam, select
from sqlalchemy.orm import Session

from billing.ledger import Charge, TenantLimits, release_reservation
from billing.seal import seal_watermark
from billing.usage import WatermarkView
from control.generation_rows import GenerationRow
from control.models import Generation, Tenant


def charge_of(generation: Generation | GenerationRow) -> Charge:
    return Charge(
        generation.id,
        generation.tenant_id,
        generation.reserved_input_tokens,
        generation.reserved_output_tokens,
    )


def read_limits(session: Session, tenant_id: str) -> TenantLimits | None:
    """The tenant's limits as admission charges them; None for an unknown tenant."""
    row = session.connection().execute(_LIMITS, {"tenant": tenant_id}).one_or_none()
    return None if row is None else TenantLimits(*row)


# built once: every admission reads them (in TenantLimits' field order)
_LIMITS = select(
    Tenant.max_concurrent_generations,
    Tenant.max_queued_tokens,
    Tenant.input_tokens_per_minute,
    Tenant.output_tokens_per_minute,
).where(Tenant.id == bindparam("tenant", type_=String()))


def seal_ended_attempt(
    session: Session, generation: Generation | GenerationRow, epoch: int, *, now: datetime
) -> WatermarkView:
    """Freezes the bill of attempt `epoch` (which control has just ended) and, if the generation is
    now terminal, releases its reservation. The caller holds the generation's row lock."""
    bill = seal_watermark(session, generation.id, epoch, now=now)
    if generation.state.terminal:
        release_reservation(session, charge_of(generation), now=now)
    return bill
