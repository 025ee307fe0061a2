"""catalog authority: who set each alias route, a worker's drain flag, and the catalog revision

Why: the control store is the one source of truth for the catalog (issue 11). A restart must keep
the routes an operator set through Admin (so each route leg records whether the config or Admin
wrote it: the config only re-seeds routes it wrote itself), a drained worker stays drained until
undrained (an operator's flag, apart from the health each heartbeat reports), and frontends refresh
their caches when the catalog changes (one counter, bumped by every catalog write, polled cheaply
on SQLite and PostgreSQL alike).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("alias_routes") as batch:
        batch.add_column(sa.Column("origin", sa.String(length=16), nullable=False, server_default="admin"))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("draining", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute("UPDATE workers SET draining = TRUE, health = 'SERVING' WHERE health = 'DRAINING'")
    op.create_table(
        "catalog_revisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_revisions")),
    )


def downgrade() -> None:
    op.drop_table("catalog_revisions")
    op.execute("UPDATE workers SET health = 'DRAINING' WHERE draining")
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("draining")
    with op.batch_alter_table("alias_routes") as batch:
        batch.drop_column("origin")
