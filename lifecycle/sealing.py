"""The billing side of control's transitions, inside a lifecycle transaction: what a generation
charges its tenant, and the seal of an attempt control has just ended."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from billing.ledger import Charge, release_reservation
from billing.seal import seal_watermark
from billing.usage import WatermarkView
from control.generation_rows import GenerationRow
from control.models import Generation


def charge_of(generation: Generation | GenerationRow) -> Charge:
    return Charge(
        generation.id,
        generation.tenant_id,
        generation.reserved_input_tokens,
        generation.reserved_output_tokens,
    )


def seal_ended_attempt(
    session: Session, generation: Generation | GenerationRow, epoch: int, *, now: datetime
) -> WatermarkView:
    """Freezes the bill of attempt `epoch` (which control has just ended) and, if the generation is
    now terminal, releases its reservation. The caller holds the generation's row lock."""
    bill = seal_watermark(session, generation.id, epoch, now=now)
    if generation.state.terminal:
        release_reservation(session, charge_of(generation), now=now)
    return bill
