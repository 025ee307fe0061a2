"""The billing tables, on the store kernel's `Base`. Counts are tokens; money is integer micro-USD
(USD millionths, columns `*_micros`), prices micro-USD per million tokens (`*_per_mtok`).

attempts (control) 1──1 usage_watermarks 1──* usage_events
generations (control) 1──1 reservations
tenants (control) 1──1 tenant_ledgers, 1──* rate_windows
api_keys (control) 1──* key_rate_windows
model_versions (control) 1──* model_prices
budget_periods: a tenant's or a key's admitted and spent money per calendar month
The foreign keys to control's tables name them (DDL); no control code is imported.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, ForeignKeyConstraint, Index, Integer, String, false
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
    # the key's own rate window was charged too (the key had limits at admission); its id
    api_key_id: Mapped[str | None] = mapped_column(String(32))
    key_rate_charged: Mapped[bool] = mapped_column(server_default=false())
    # the price pinned at admission (what its usage is billed at), micro-USD per million tokens
    input_per_mtok: Mapped[int] = mapped_column(BigInteger, server_default="0")
    cached_input_per_mtok: Mapped[int] = mapped_column(BigInteger, server_default="0")
    output_per_mtok: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # the budget month charged (None before 0006), the maximum cost reserved, and at release the
    # spend derived from the sealed watermarks (billing/prices.py `attempt_cost`)
    budget_period: Mapped[datetime | None]
    reserved_micros: Mapped[int] = mapped_column(BigInteger, server_default="0")
    spent_micros: Mapped[int | None] = mapped_column(BigInteger)


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


class KeyRateWindow(Base):
    """Tokens admitted with one API key in one fixed window (keys with their own rate limits only)."""

    __tablename__ = "key_rate_windows"

    api_key_id: Mapped[str] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(primary_key=True)
    input_tokens: Mapped[int]
    output_tokens: Mapped[int]


class ModelPrice(Base):
    """A model version's price from `effective_at` on (until a later row's): what a generation
    admitted then is billed at. Rows are never changed, so they are also the record of who set what."""

    __tablename__ = "model_prices"
    __table_args__ = (Index("ix_model_prices_version_effective", "model_version_id", "effective_at"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    model_version_id: Mapped[str] = mapped_column(ForeignKey("model_versions.id"))
    input_per_mtok: Mapped[int] = mapped_column(BigInteger)  # micro-USD per million prompt tokens
    cached_input_per_mtok: Mapped[int] = mapped_column(BigInteger)  # ... served from the prefix cache
    output_per_mtok: Mapped[int] = mapped_column(BigInteger)  # ... per million output tokens
    effective_at: Mapped[datetime]
    set_at: Mapped[datetime]
    set_by: Mapped[str] = mapped_column(String(200))  # the operator and admin key fingerprint


class BudgetPeriod(Base):
    """A tenant's or key's money in one calendar month (UTC) of admissions: the maximum cost of its
    live generations, and the spend of those that ended. Admission checks reserved + spent against
    the budget by a conditional UPDATE, as the ledger does tokens."""

    __tablename__ = "budget_periods"

    subject: Mapped[str] = mapped_column(String(160), primary_key=True)  # "tenant:<id>" or "key:<id>"
    period_start: Mapped[datetime] = mapped_column(primary_key=True)  # the month's first instant
    reserved_micros: Mapped[int] = mapped_column(BigInteger)
    spent_micros: Mapped[int] = mapped_column(BigInteger)
