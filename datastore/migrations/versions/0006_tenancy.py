"""tenancy: tenants and keys managed at run time, prices, budgets, and usage per key

Why: tenants and their keys existed only in the config (issue 51). They are now created, changed,
disabled, rotated and revoked through Admin while the platform runs, so the store records each
change (who, when: tenant_changes) and what the config did not write (an `origin` on tenants and
keys, as routes have, so a restart re-seeds only the config's own). A key gets a public id (usage,
limits and budgets are per key and must survive a rotation of its secret), a label, scopes, an
expiry, a revocation time (kept: usage names revoked keys), its own rate limits and budget, and the
secret it replaced for the rotation's overlap. Money appears: a price per model version with its
effective time (model_prices), a budget per tenant and key per calendar month, the months' reserved
and spent money (budget_periods), and on each reservation the price it pinned, its maximum cost and,
at release, its spend; a generation records the key that admitted it. Keys with their own rate
limits get their own rate windows.

Existing keys get random ids (never derived from the digest: a short config key's digest prefix
would help a guess), scopes generate,usage, and origin config, as do existing tenants.

Revision ID: 0006_tenancy
Revises: 0005
Create Date: 2026-12-08
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0006_tenancy"
down_revision = "0005"
branch_labels = None
depends_on = None

MONEY = sa.BigInteger()
TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("monthly_budget_micros", MONEY, nullable=True))
        batch.add_column(sa.Column("allowed_models", sa.Text(), nullable=True))
        batch.add_column(sa.Column("disabled_at", TIME, nullable=True))
        batch.add_column(sa.Column("origin", sa.String(length=16), nullable=False, server_default="config"))
    _upgrade_api_keys()
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("api_key_id", sa.String(length=32), nullable=True))
    with op.batch_alter_table("reservations") as batch:
        batch.add_column(sa.Column("api_key_id", sa.String(length=32), nullable=True))
        batch.add_column(
            sa.Column("key_rate_charged", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        for column in ("input_per_mtok", "cached_input_per_mtok", "output_per_mtok", "reserved_micros"):
            batch.add_column(sa.Column(column, sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("budget_period", TIME, nullable=True))
        batch.add_column(sa.Column("spent_micros", MONEY, nullable=True))
    op.create_table(
        "tenant_changes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", TIME, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=24), nullable=False),
        sa.Column("tenant_id", sa.String(length=128), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenant_changes")),
    )
    op.create_index(op.f("ix_tenant_changes_at"), "tenant_changes", ["at"])
    op.create_index(op.f("ix_tenant_changes_tenant_id"), "tenant_changes", ["tenant_id"])
    op.create_table(
        "key_rate_windows",
        sa.Column("api_key_id", sa.String(length=32), nullable=False),
        sa.Column("window_start", TIME, nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["api_key_id"],
            ["api_keys.id"],
            name=op.f("fk_key_rate_windows_api_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("api_key_id", "window_start", name=op.f("pk_key_rate_windows")),
    )
    op.create_table(
        "model_prices",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("model_version_id", sa.String(length=200), nullable=False),
        sa.Column("input_per_mtok", sa.BigInteger(), nullable=False),
        sa.Column("cached_input_per_mtok", sa.BigInteger(), nullable=False),
        sa.Column("output_per_mtok", sa.BigInteger(), nullable=False),
        sa.Column("effective_at", TIME, nullable=False),
        sa.Column("set_at", TIME, nullable=False),
        sa.Column("set_by", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name=op.f("fk_model_prices_model_version_id_model_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_prices")),
    )
    op.create_index("ix_model_prices_version_effective", "model_prices", ["model_version_id", "effective_at"])
    op.create_table(
        "budget_periods",
        sa.Column("subject", sa.String(length=160), nullable=False),
        sa.Column("period_start", TIME, nullable=False),
        sa.Column("reserved_micros", MONEY, nullable=False),
        sa.Column("spent_micros", MONEY, nullable=False),
        sa.PrimaryKeyConstraint("subject", "period_start", name=op.f("pk_budget_periods")),
    )


def _upgrade_api_keys() -> None:
    """The digest stops being the key: a random public id becomes the primary key."""
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("id", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("previous_sha256", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("previous_expires_at", TIME, nullable=True))
        batch.add_column(sa.Column("name", sa.String(length=200), nullable=False, server_default=""))
        batch.add_column(
            sa.Column("scopes", sa.String(length=64), nullable=False, server_default="generate,usage")
        )
        for column in ("expires_at", "revoked_at", "last_used_at"):
            batch.add_column(sa.Column(column, TIME, nullable=True))
        batch.add_column(sa.Column("input_tokens_per_minute", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("output_tokens_per_minute", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("monthly_budget_micros", MONEY, nullable=True))
        batch.add_column(sa.Column("origin", sa.String(length=16), nullable=False, server_default="config"))
    bind = op.get_bind()
    for (digest,) in bind.execute(sa.text("SELECT key_sha256 FROM api_keys")).all():
        new_id = f"key_{secrets.token_hex(8)}"
        bind.execute(
            sa.text("UPDATE api_keys SET id = :id WHERE key_sha256 = :d"), {"id": new_id, "d": digest}
        )
    with op.batch_alter_table("api_keys", recreate="always") as batch:
        batch.alter_column("id", existing_type=sa.String(length=32), nullable=False)
        batch.drop_constraint("pk_api_keys", type_="primary")
        batch.create_primary_key("pk_api_keys", ["id"])
        batch.create_unique_constraint(op.f("uq_api_keys_key_sha256"), ["key_sha256"])


def downgrade() -> None:
    op.drop_table("budget_periods")
    op.drop_index("ix_model_prices_version_effective", table_name="model_prices")
    op.drop_table("model_prices")
    op.drop_table("key_rate_windows")
    op.drop_index(op.f("ix_tenant_changes_tenant_id"), table_name="tenant_changes")
    op.drop_index(op.f("ix_tenant_changes_at"), table_name="tenant_changes")
    op.drop_table("tenant_changes")
    # plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+ too): a batch would copy these tables, and
    # SQLite's DROP TABLE of the old copy fails on, or cascades to, the rows that reference them
    for column in (
        "spent_micros",
        "budget_period",
        "reserved_micros",
        "output_per_mtok",
        "cached_input_per_mtok",
        "input_per_mtok",
        "key_rate_charged",
        "api_key_id",
    ):
        op.drop_column("reservations", column)
    op.drop_column("generations", "api_key_id")
    # a revoked key must not come back as a valid one: the old schema cannot mark it
    op.execute("DELETE FROM api_keys WHERE revoked_at IS NOT NULL")
    with op.batch_alter_table("api_keys", recreate="always") as batch:
        batch.drop_constraint(op.f("uq_api_keys_key_sha256"), type_="unique")
        batch.drop_constraint("pk_api_keys", type_="primary")
        batch.create_primary_key("pk_api_keys", ["key_sha256"])
        for column in (
            "origin",
            "monthly_budget_micros",
            "output_tokens_per_minute",
            "input_tokens_per_minute",
            "last_used_at",
            "revoked_at",
            "expires_at",
            "scopes",
            "name",
            "previous_expires_at",
            "previous_sha256",
            "id",
        ):
            batch.drop_column(column)
    for column in ("origin", "disabled_at", "allowed_models", "monthly_budget_micros"):
        op.drop_column("tenants", column)
