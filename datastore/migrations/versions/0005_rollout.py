"""model roll-out: the record of catalog changes (who, when, an alias' route before and after)

Why: model repository pushes (issue 15) add promote, rollback and retire. A rollback restores the
route an alias had before its last change, so that route must be in the store (a frontend restart
or another frontend must roll back the same way), and operators need to see who changed what when.
One append-only table serves both.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_changes",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("alias", sa.String(length=128), nullable=True),
        sa.Column("model_version_id", sa.String(length=200), nullable=True),
        sa.Column("route_before", sa.Text(), nullable=True),
        sa.Column("route_after", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_changes")),
    )
    op.create_index(op.f("ix_model_changes_at"), "model_changes", ["at"])
    op.create_index(op.f("ix_model_changes_alias"), "model_changes", ["alias"])


def downgrade() -> None:
    op.drop_index(op.f("ix_model_changes_alias"), table_name="model_changes")
    op.drop_index(op.f("ix_model_changes_at"), table_name="model_changes")
    op.drop_table("model_changes")
