"""cache summaries: what each worker's prefix cache holds, per loaded version

Why: with several workers, a request sharing a long prefix with earlier ones runs fastest on the
worker that still holds that prefix's KV blocks (issue 53). Each worker host now publishes, at
every heartbeat, a bounded summary of each engine's prefix cache (contracts/prefix_summary.py): 8-byte
fingerprints of block keys, which are already salted per tenant, with the compatibility key and
block size a frontend needs to hash a prompt the same way. It lives beside the version's KV pool
on the worker_versions row it describes, so a heartbeat replaces both at once and a worker that
unloads a version, or is retired, takes its summary with it.

Revision ID: 0007_cache_summaries
Revises: 0006_tenancy
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_cache_summaries"
down_revision = "0006_tenancy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("worker_versions") as batch:
        batch.add_column(sa.Column("cache_key", sa.String(length=400), nullable=True))
        batch.add_column(sa.Column("cached_blocks", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("worker_versions") as batch:
        batch.drop_column("cached_blocks")
        batch.drop_column("cache_key")
