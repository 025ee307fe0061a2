"""The billing side of control's transitions, inside a lifecycle transaction: what a generation
charges its tenant, the tenant's limits, and the seal of an attempt control has just ended."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from billing.ledger import Charge, TenantLimits, release_reservation
from billing.seal import seal_watermark
from billing.usage import WatermarkView
from control.models import Generation, Tenant


def charge_of(generation: Generation) -> Charge:
    return Charge(
        generation.id,
        generation.tenant_id,
        generation.reserved_input_tokens,
        generation.reserved_output_tokens,
    )


def limits_of(tenant: Tenant) -> TenantLimits:
    return TenantLimits(
        max_concurrent_generations=tenant.max_concurrent_generations,
        max_queued_tokens=tenant.max_queued_tokens,
        input_tokens_per_minute=tenant.input_tokens_per_minute,
        output_tokens_per_minute=tenant.output_tokens_per_minute,
    )


def seal_ended_attempt(
    session: Session, generation: Generation, epoch: int, *, now: datetime
) -> WatermarkView:
    """Freezes the bill of attempt `epoch` (which control has just ended) and, if the generation is
    now terminal, releases its reservation. The caller holds the generation's row lock."""
    bill = seal_watermark(session, generation.id, epoch, now=now)
    if generation.state.terminal:
        release_reservation(session, charge_of(generation), now=now)
    return bill
