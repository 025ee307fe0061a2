"""billing tables: usage watermarks and events, reservations, tenant ledgers, rate windows

Why: billing needs durable cumulative watermarks per (generation, epoch) deduplicated by usage-event
identity and sealed at terminalization, and a tenant ledger for admission (docs/design.md §4, §5).

Revision ID: 0002
Revises: 0001
Create Date: 2026-05-01
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _id(name: str) -> sa.Column[str]:
    return sa.Column(name, sa.String(length=128), nullable=False)


def _int(name: str, *, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def _time(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "usage_watermarks",
        _id("generation_id"),
        _int("epoch"),
        _int("input_tokens"),
        _int("output_tokens"),
        _int("cached_input_tokens"),
        _int("observed_input_tokens"),
        _int("observed_output_tokens"),
        _int("observed_cached_input_tokens"),
        _time("sealed_at", nullable=True),
        _time("updated_at"),
        sa.ForeignKeyConstraint(
            ["generation_id", "epoch"],
            ["attempts.generation_id", "attempts.epoch"],
            name=op.f("fk_usage_watermarks_generation_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("generation_id", "epoch", name=op.f("pk_usage_watermarks")),
    )
    op.create_table(
        "usage_events",
        _id("generation_id"),
        _int("epoch"),
        _int("sequence"),
        _int("input_tokens"),
        _int("output_tokens"),
        _int("cached_input_tokens"),
        _time("recorded_at"),
        sa.ForeignKeyConstraint(
            ["generation_id", "epoch"],
            ["usage_watermarks.generation_id", "usage_watermarks.epoch"],
            name=op.f("fk_usage_events_generation_id_usage_watermarks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("generation_id", "epoch", "sequence", name=op.f("pk_usage_events")),
    )
    op.create_table(
        "reservations",
        _id("generation_id"),
        _id("tenant_id"),
        _time("window_start"),
        _time("reserved_at"),
        _time("released_at", nullable=True),
        _int("refunded_input_tokens", nullable=True),
        _int("refunded_output_tokens", nullable=True),
        sa.ForeignKeyConstraint(
            ["generation_id"],
            ["generations.id"],
            name=op.f("fk_reservations_generation_id_generations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_reservations_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("generation_id", name=op.f("pk_reservations")),
    )
    op.create_index(op.f("ix_reservations_tenant_id"), "reservations", ["tenant_id"])
    op.create_table(
        "tenant_ledgers",
        _id("tenant_id"),
        _int("active_generations"),
        _int("reserved_tokens"),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_tenant_ledgers_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_tenant_ledgers")),
    )
    op.create_table(
        "rate_windows",
        _id("tenant_id"),
        _time("window_start"),
        _int("input_tokens"),
        _int("output_tokens"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_rate_windows_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("tenant_id", "window_start", name=op.f("pk_rate_windows")),
    )


def downgrade() -> None:
    op.drop_table("rate_windows")
    op.drop_table("tenant_ledgers")
    op.drop_index(op.f("ix_reservations_tenant_id"), table_name="reservations")
    op.drop_table("reservations")
    op.drop_table("usage_events")
    op.drop_table("usage_watermarks")
