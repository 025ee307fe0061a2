"""The billing tables, on the store kernel's `Base`. All counts are tokens.

attempts (control) 1──1 usage_watermarks 1──* usage_events
generations (control) 1──1 reservations
tenants (control) 1──1 tenant_ledgers, 1──* rate_windows
The foreign keys to control's tables name them (DDL); no control code is imported.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, ForeignKeyConstraint, String
from sqlalchemy.orm import Mapped, mapped_column

from datastore.base import Base


class Watermark(Base):
    """The durable cumulative usage of one attempt, keyed by (generation_id, epoch).

    The billable columns advance monotonically (max, never sum) until `sealed_at` is set; from then on
    they are the attempt's final bill. The observed columns keep the max of every report ever
    received, sealed or not: the operator's estimate of physical work.
    """

    __tablename__ = "usage_watermarks"
    __table_args__ = (
        ForeignKeyConstraint(
            ["generation_id", "epoch"], ["attempts.generation_id", "attempts.epoch"], ondelete="CASCADE"
        ),
    )

    generation_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    epoch: Mapped[int] = mapped_column(primary_key=True)
    input_tokens: Mapped[int]  # processed prompt tokens
    output_tokens: Mapped[int]  # generated output tokens
    cached_input_tokens: Mapped[int]  # prompt tokens served from the prefix cache
    observed_input_tokens: Mapped[int]
    observed_output_tokens: Mapped[int]
    observed_cached_input_tokens: Mapped[int]
    sealed_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]


class UsageEvent(Base):
    """One cumulative usage report; its identity is (generation_id, epoch, sequence)."""

    __tablename__ = "usage_events"
    __table_args__ = (
        ForeignKeyConstraint(
            ["generation_id", "epoch"],
            ["usage_watermarks.generation_id", "usage_watermarks.epoch"],
            ondelete="CASCADE",
        ),
    )

    generation_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    epoch: Mapped[int] = mapped_column(primary_key=True)
    sequence: Mapped[int] = mapped_column(primary_key=True)  # per (generation, epoch), from 1
    input_tokens: Mapped[int]  # cumulative
    output_tokens: Mapped[int]  # cumulative
    cached_input_tokens: Mapped[int]  # cumulative
    recorded_at: Mapped[datetime]


class Reservation(Base):
    """A generation's admission charge against its tenant's ledger. The amounts are not stored here:
    they are the generation's reserved tokens, passed in as a `ledger.Charge` to reserve and release.
    Released once, when the generation ends."""

    __tablename__ = "reservations"

    generation_id: Mapped[str] = mapped_column(
        ForeignKey("generations.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    window_start: Mapped[datetime]  # the rate window charged at admission
    reserved_at: Mapped[datetime]
    released_at: Mapped[datetime | None]
    refunded_input_tokens: Mapped[int | None]  # unused reservation returned to the rate window
    refunded_output_tokens: Mapped[int | None]


class TenantLedger(Base):
    """A tenant's live load: non-terminal generations and their reserved tokens."""

    __tablename__ = "tenant_ledgers"

    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    active_generations: Mapped[int]
    reserved_tokens: Mapped[int]  # prompt + max output of every live generation


class RateWindow(Base):
    """Tokens admitted for a tenant in one fixed window [window_start, window_start + length)."""

    __tablename__ = "rate_windows"

    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(primary_key=True)
    input_tokens: Mapped[int]
    output_tokens: Mapped[int]
