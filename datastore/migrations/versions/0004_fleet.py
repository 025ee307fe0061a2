"""the fleet: frontend registrations, a generation's owning frontend, worker leases and KV pools

Why: the fleet shape (issue 13) runs several stateless frontends and remote worker hosts over one
PostgreSQL. A Resume or Cancel may reach any frontend, so each generation records the frontend
running it, and each frontend registers where its internal relay listens, with a lease (a frontend
gone is one whose lease expired). Frontends no longer start the workers they route to: a worker
registers its address, the KV pool of each loaded version (pool size and block size, what routing
prices requests in) and a registration lease that each heartbeat extends; frontends drop a worker
whose lease expired.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "frontends",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("relay_address", sa.String(length=200), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_frontends")),
    )
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("owner_frontend_id", sa.String(length=128), nullable=True))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("worker_versions") as batch:
        batch.add_column(sa.Column("kv_blocks", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("block_size", sa.Integer(), nullable=False, server_default="16"))


def downgrade() -> None:
    with op.batch_alter_table("worker_versions") as batch:
        batch.drop_column("block_size")
        batch.drop_column("kv_blocks")
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("lease_expires_at")
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("owner_frontend_id")
    op.drop_table("frontends")
