"""The control tables: tenants and their keys (with the record of their changes), model versions and
alias routes, workers, generations and their execution attempts. Operations live in the modules
named for each noun. The billing tables (watermarks, usage events, reservations, prices, budgets)
live in `billing.models` on the kernel's same `Base`; they reference these tables by name, and
nothing here knows of them.
"""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Enum,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.states import GenerationState
from datastore.base import Base

ID = String(128)  # tenant, worker and generation ids; model names
KEY_ID = String(32)  # an API key's public id
SHA256 = String(64)  # lower-case hex digest


def _enum(cls: type[enum.Enum], name: str) -> Enum:
    """A portable enum: VARCHAR + CHECK constraint (no PostgreSQL enum type to migrate)."""
    return Enum(cls, name=name, native_enum=False, create_constraint=True, length=16)


class ModelVersionStatus(enum.StrEnum):
    REGISTERED = "REGISTERED"  # known, not yet servable
    READY = "READY"  # routes may send traffic to it
    DRAINING = "DRAINING"  # live generations finish; no new admissions
    RETIRED = "RETIRED"  # never served again


class WorkerHealth(enum.StrEnum):
    """What a worker's last heartbeat observed (draining is the operator's flag, `Worker.draining`)."""

    SERVING = "SERVING"
    NOT_SERVING = "NOT_SERVING"


class RouteOrigin(enum.StrEnum):
    """Who wrote an alias route, a tenant or a key: the config re-seeds only what it wrote
    (frontend/catalog/cache.py `seed_catalog`); what Admin wrote or changed holds across restarts."""

    CONFIG = "config"
    ADMIN = "admin"


Origin = RouteOrigin  # the same two writers, for tenants and keys
MONEY = BigInteger  # micro-USD (USD millionths), the one unit of money in the store


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    weight: Mapped[float]  # weighted fair queuing share inside a tier
    max_concurrent_generations: Mapped[int]
    input_tokens_per_minute: Mapped[int]  # prompt tokens admitted per minute
    output_tokens_per_minute: Mapped[int]  # max_output_tokens admitted per minute
    max_queued_tokens: Mapped[int]  # reserved (prompt + max output) tokens of live generations
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # spend admitted per calendar month (UTC), in micro-USD; None: no budget (billing/budgets.py)
    monthly_budget_micros: Mapped[int | None] = mapped_column(MONEY)
    allowed_models: Mapped[str | None] = mapped_column(Text)  # comma-separated aliases; None: every model
    disabled_at: Mapped[datetime | None]  # set: new generations refused, running ones finish
    origin: Mapped[str] = mapped_column(String(16), server_default=Origin.CONFIG.value)

    api_keys: Mapped[list[ApiKey]] = relationship(
        back_populates="tenant", lazy="raise", cascade="all, delete-orphan", passive_deletes=True
    )


class ApiKey(Base):
    """An API key: a public id, and its secret kept only as a sha256 digest. A rotation replaces the
    secret under the same id (usage, limits and budget stay the key's), the previous one accepted
    until `previous_expires_at`. Revoked keys are kept (usage names them), never accepted again."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(KEY_ID, primary_key=True)  # "key_" + 16 hex digits, shown to users
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    key_sha256: Mapped[str] = mapped_column(SHA256, unique=True)  # the current secret's digest
    previous_sha256: Mapped[str | None] = mapped_column(SHA256)  # the secret before the last rotation
    previous_expires_at: Mapped[datetime | None]  # ... accepted until then
    name: Mapped[str] = mapped_column(String(200), server_default="")  # a label for people
    scopes: Mapped[str] = mapped_column(String(64), server_default="generate,usage")  # comma-separated
    expires_at: Mapped[datetime | None]  # None: never
    revoked_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]  # to within a catalog refresh (frontends batch it)
    input_tokens_per_minute: Mapped[int | None]  # per-key rate limits beside the tenant's; None: none
    output_tokens_per_minute: Mapped[int | None]
    monthly_budget_micros: Mapped[int | None] = mapped_column(MONEY)  # as the tenant's, for this key
    origin: Mapped[str] = mapped_column(String(16), server_default=Origin.CONFIG.value)
    created_at: Mapped[datetime]

    tenant: Mapped[Tenant] = relationship(back_populates="api_keys", lazy="raise")


class ModelVersion(Base):
    """An immutable weights + tokenizer + template (+ adapter) combination."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[str] = mapped_column(String(200), primary_key=True)  # "name@version"
    name: Mapped[str] = mapped_column(ID)
    version: Mapped[str] = mapped_column(String(64))
    weights_sha256: Mapped[str] = mapped_column(SHA256)
    tokenizer_sha256: Mapped[str] = mapped_column(SHA256)
    template_sha256: Mapped[str] = mapped_column(SHA256)
    adapter: Mapped[str | None] = mapped_column(String(200))  # adapter id@sha256, None for base weights
    compatibility_key: Mapped[str] = mapped_column(String(64))  # equal keys => identical KV for equal ids
    artifact_uri: Mapped[str] = mapped_column(String(1000))
    status: Mapped[ModelVersionStatus] = mapped_column(_enum(ModelVersionStatus, "status"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class AliasRoute(Base):
    """One leg of an alias: `weight` is its relative share of the alias' traffic (canaries)."""

    __tablename__ = "alias_routes"

    alias: Mapped[str] = mapped_column(ID, primary_key=True)
    model_version_id: Mapped[str] = mapped_column(ForeignKey("model_versions.id"), primary_key=True)
    weight: Mapped[float]
    origin: Mapped[RouteOrigin] = mapped_column(String(16), server_default=RouteOrigin.ADMIN.value)

    model_version: Mapped[ModelVersion] = relationship(lazy="raise")


class Worker(Base):
    """A registry entry: what a worker advertised in its last heartbeat (an estimate, not a reservation),
    and its registration lease: a worker whose lease has expired is not routed to (control/workers.py)."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    address: Mapped[str] = mapped_column(String(200))  # host:port of its Triton gRPC endpoint
    health: Mapped[WorkerHealth] = mapped_column(_enum(WorkerHealth, "health"))
    free_blocks: Mapped[int]  # advertised free KV-cache blocks
    last_heartbeat: Mapped[datetime]
    draining: Mapped[bool] = mapped_column(server_default=false())  # Admin: no new generations
    lease_expires_at: Mapped[datetime | None]  # each heartbeat extends it; None: registered before 0004

    loaded_versions: Mapped[list[WorkerVersion]] = relationship(
        lazy="raise", cascade="all, delete-orphan", passive_deletes=True
    )


class WorkerVersion(Base):
    """A version a worker has loaded, with the KV pool its engine for that version holds."""

    __tablename__ = "worker_versions"

    worker_id: Mapped[str] = mapped_column(ForeignKey("workers.id", ondelete="CASCADE"), primary_key=True)
    model_version_id: Mapped[str] = mapped_column(ForeignKey("model_versions.id"), primary_key=True)
    kv_blocks: Mapped[int] = mapped_column(server_default="0")  # blocks in the engine's pool
    block_size: Mapped[int] = mapped_column(server_default="16")  # tokens per block
    # its prefix cache's summary (contracts/prefix_summary.py): the engine's compatibility key and
    # its blocks' 8-byte fingerprints, concatenated; None until the engine published one
    cache_key: Mapped[str | None] = mapped_column(String(400))
    cached_blocks: Mapped[bytes | None] = mapped_column(LargeBinary)


class Frontend(Base):
    """A frontend replica's registration: where its internal relay listens (forwarded Resume and
    Cancel, frontend/fleet/relay.py) and its lease. A frontend whose lease has expired is gone: its live
    generations are swept by the others. Rows outlive their frontend (generations name their owner)."""

    __tablename__ = "frontends"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    relay_address: Mapped[str] = mapped_column(String(200))  # host:port of its relay; "" for none
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    lease_expires_at: Mapped[datetime]  # each heartbeat extends it; a clean exit ends it
    draining: Mapped[bool] = mapped_column(server_default=false())  # SIGTERM: finishing, admitting none


class Generation(Base):
    """One logical generation: unique per (tenant, request id); pinned to one model version."""

    __tablename__ = "generations"
    __table_args__ = (UniqueConstraint("tenant_id", "request_id"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"))
    request_id: Mapped[str] = mapped_column(String(256))  # client-chosen idempotency key
    payload_sha256: Mapped[str] = mapped_column(SHA256)  # hash of the effective request
    model_version_id: Mapped[str] = mapped_column(ForeignKey("model_versions.id"))
    state: Mapped[GenerationState] = mapped_column(_enum(GenerationState, "state"), index=True)
    current_epoch: Mapped[int | None]  # epoch of the latest attempt; None before the first
    cancel_requested: Mapped[bool]
    cancel_requested_at: Mapped[datetime | None]
    # The budget reservation, in tokens: the prompt after the exact template, and max_output_tokens.
    reserved_input_tokens: Mapped[int]
    reserved_output_tokens: Mapped[int]
    terminal_reason: Mapped[str | None] = mapped_column(String(64))  # e.g. COMPLETED, OUTPUT_LIMIT
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    # The frontend replica running it (its stream, its queue entry): a registry id, deliberately not
    # a foreign key (frontends come and go). None for generations admitted before 0004.
    owner_frontend_id: Mapped[str | None] = mapped_column(ID)
    # The API key that admitted it (usage per key); None before 0006 and for callers without one
    api_key_id: Mapped[str | None] = mapped_column(KEY_ID)

    attempts: Mapped[list[Attempt]] = relationship(
        back_populates="generation", lazy="raise", order_by="Attempt.epoch"
    )

    @property
    def reserved_tokens(self) -> int:
        return self.reserved_input_tokens + self.reserved_output_tokens


class Attempt(Base):
    """One execution of a generation on one worker, identified by its epoch (1, 2, ...).

    Writes by an attempt are accepted only while its epoch is the generation's current one, it has
    not ended, and `lease_expires_at` is in the future (see `attempts.fence`).
    """

    __tablename__ = "attempts"
    __table_args__ = (Index("ix_attempts_open_lease", "ended_at", "lease_expires_at"),)

    generation_id: Mapped[str] = mapped_column(
        ForeignKey("generations.id", ondelete="CASCADE"), primary_key=True
    )
    epoch: Mapped[int] = mapped_column(primary_key=True)
    # A registry id, deliberately not a foreign key: attempts outlive registry entries.
    worker_id: Mapped[str] = mapped_column(ID)
    started_at: Mapped[datetime]
    lease_expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    outcome: Mapped[GenerationState | None] = mapped_column(_enum(GenerationState, "outcome"))
    terminal_reason: Mapped[str | None] = mapped_column(String(64))  # e.g. LEASE_EXPIRED, SUPERSEDED

    generation: Mapped[Generation] = relationship(back_populates="attempts", lazy="raise")


class CatalogRevision(Base):
    """One row (id 1): bumped in the transaction of every catalog write (tenants, keys, versions,
    routes, worker drain flags); frontends poll it and reload their caches when it moves."""

    __tablename__ = "catalog_revisions"

    id: Mapped[int] = mapped_column(primary_key=True)
    revision: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


class ModelChange(Base):
    """One recorded catalog change: who made it, when, and an alias route before and after it
    (JSON {version id: weight}); RollbackAlias restores the `route_before` of an alias' last change."""

    __tablename__ = "model_changes"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime] = mapped_column(index=True)
    actor: Mapped[str] = mapped_column(String(200))  # "config", or operator and admin key fingerprint
    action: Mapped[str] = mapped_column(String(16))  # PUSH, REGISTER, SET_ROUTE, PROMOTE, ROLLBACK, RETIRE...
    alias: Mapped[str | None] = mapped_column(ID, index=True)
    model_version_id: Mapped[str | None] = mapped_column(String(200))
    route_before: Mapped[str | None] = mapped_column(Text)  # JSON {version id: weight}; None: no route change
    route_after: Mapped[str | None] = mapped_column(Text)


class TenantChange(Base):
    """One recorded change to a tenant or one of its keys: who, when, what (never a secret)."""

    __tablename__ = "tenant_changes"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime] = mapped_column(index=True)
    actor: Mapped[str] = mapped_column(String(200))  # "config", an operator (admin key), or a tenant's key
    action: Mapped[str] = mapped_column(String(24))  # TENANT_CREATE, TENANT_UPDATE, KEY_REVOKE, ...
    tenant_id: Mapped[str] = mapped_column(ID, index=True)
    key_id: Mapped[str | None] = mapped_column(KEY_ID)
    detail: Mapped[str | None] = mapped_column(Text)  # JSON of the settings set
