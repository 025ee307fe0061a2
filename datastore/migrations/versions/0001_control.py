"""control tables: tenants, API keys, model versions, alias routes, workers, generations, attempts

Why: the durable half of the platform (docs/design.md §4) — generation identity unique per (tenant, request
id), execution attempts with epochs and leases, and the registry of model versions and workers.

Revision ID: 0001
Revises:
Create Date: 2026-05-01
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STATES = ("QUEUED", "RUNNING", "COMPLETED", "CANCELED", "INTERRUPTED", "FAILED")


def _id(name: str, length: int = 128, *, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def _int(name: str, *, nullable: bool = False) -> sa.Column[int]:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def _time(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _enum(name: str, values: tuple[str, ...], *, nullable: bool = False) -> sa.Column[str]:
    kind = sa.Enum(*values, name=name, native_enum=False, create_constraint=True, length=16)
    return sa.Column(name, kind, nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "tenants",
        _id("id"),
        sa.Column("weight", sa.Double(), nullable=False),
        _int("max_concurrent_generations"),
        _int("input_tokens_per_minute"),
        _int("output_tokens_per_minute"),
        _int("max_queued_tokens"),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
    )
    op.create_table(
        "api_keys",
        _id("key_sha256", 64),
        _id("tenant_id"),
        _time("created_at"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_api_keys_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("key_sha256", name=op.f("pk_api_keys")),
    )
    op.create_index(op.f("ix_api_keys_tenant_id"), "api_keys", ["tenant_id"])
    op.create_table(
        "model_versions",
        _id("id", 200),
        _id("name"),
        _id("version", 64),
        _id("weights_sha256", 64),
        _id("tokenizer_sha256", 64),
        _id("template_sha256", 64),
        _id("adapter", 200, nullable=True),
        _id("compatibility_key", 64),
        _id("artifact_uri", 1000),
        _enum("status", ("REGISTERED", "READY", "DRAINING", "RETIRED")),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_versions")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_model_versions_name_version")),
    )
    op.create_table(
        "alias_routes",
        _id("alias"),
        _id("model_version_id", 200),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name=op.f("fk_alias_routes_model_version_id_model_versions"),
        ),
        sa.PrimaryKeyConstraint("alias", "model_version_id", name=op.f("pk_alias_routes")),
    )
    op.create_table(
        "workers",
        _id("id"),
        _id("address", 200),
        _enum("health", ("SERVING", "NOT_SERVING", "DRAINING")),
        _int("free_blocks"),
        _time("last_heartbeat"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    op.create_table(
        "worker_versions",
        _id("worker_id"),
        _id("model_version_id", 200),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name=op.f("fk_worker_versions_model_version_id_model_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_worker_versions_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("worker_id", "model_version_id", name=op.f("pk_worker_versions")),
    )
    op.create_table(
        "generations",
        _id("id"),
        _id("tenant_id"),
        _id("request_id", 256),
        _id("payload_sha256", 64),
        _id("model_version_id", 200),
        _enum("state", STATES),
        _int("current_epoch", nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        _time("cancel_requested_at", nullable=True),
        _int("reserved_input_tokens"),
        _int("reserved_output_tokens"),
        _id("terminal_reason", 64, nullable=True),
        _time("created_at"),
        _time("updated_at"),
        _time("finished_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name=op.f("fk_generations_model_version_id_model_versions"),
        ),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name=op.f("fk_generations_tenant_id_tenants")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_generations")),
        sa.UniqueConstraint("tenant_id", "request_id", name=op.f("uq_generations_tenant_id_request_id")),
    )
    op.create_index(op.f("ix_generations_state"), "generations", ["state"])
    op.create_table(
        "attempts",
        _id("generation_id"),
        _int("epoch"),
        _id("worker_id"),
        _time("started_at"),
        _time("lease_expires_at"),
        _time("ended_at", nullable=True),
        _enum("outcome", STATES, nullable=True),
        _id("terminal_reason", 64, nullable=True),
        sa.ForeignKeyConstraint(
            ["generation_id"],
            ["generations.id"],
            name=op.f("fk_attempts_generation_id_generations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("generation_id", "epoch", name=op.f("pk_attempts")),
    )
    op.create_index("ix_attempts_open_lease", "attempts", ["ended_at", "lease_expires_at"])


def downgrade() -> None:
    op.drop_index("ix_attempts_open_lease", table_name="attempts")
    op.drop_table("attempts")
    op.drop_index(op.f("ix_generations_state"), table_name="generations")
    op.drop_table("generations")
    op.drop_table("worker_versions")
    op.drop_table("workers")
    op.drop_table("alias_routes")
    op.drop_table("model_versions")
    op.drop_index(op.f("ix_api_keys_tenant_id"), table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("tenants")
