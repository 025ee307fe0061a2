"""Generation identity: create-or-get unique per (tenant, request id), lookups, and row locks.

A retry with the same request id and the same effective payload gets the existing generation;
a different payload under the same request id raises `RequestIdConflict`. Concurrent creates are
safe: `INSERT … ON CONFLICT DO NOTHING RETURNING id` decides, whichever transaction wins, and only
a request id found there is read back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Table, func, select
from sqlalchemy.orm import Session

from control.errors import GenerationNotFound, RequestIdConflict
from control.models import Generation
from control.states import GenerationState
from datastore.upsert import built_once, insert_for


@dataclass(slots=True, frozen=True)
class NewGeneration:
    generation_id: str  # the id to use if this request id is new (the caller generates it)
    tenant_id: str
    request_id: str
    payload_sha256: str  # hex digest of the effective request (model version, tokens, settings)
    model_version_id: str  # the pinned immutable version, "name@version"
    reserved_input_tokens: int  # prompt tokens after the exact template
    reserved_output_tokens: int  # max_output_tokens
    owner_frontend_id: str | None = None  # the frontend replica that will run it
    api_key_id: str | None = None  # the API key that admits it (its own limits, budget and usage)

    def __post_init__(self) -> None:
        if self.reserved_input_tokens < 0 or self.reserved_output_tokens < 0:
            raise ValueError("reserved token counts must be non-negative")
        if not (self.generation_id and self.tenant_id and self.request_id):
            raise ValueError("generation id, tenant id and request id must be non-empty")


@dataclass(slots=True, frozen=True)
class CreateOrGet:
    generation: Generation
    created: bool  # False: an existing generation with the same request id and payload


_CREATE: dict[str, Any] = {}  # per dialect: the INSERT ... ON CONFLICT DO NOTHING RETURNING id, built once


def _build_create(session: Session) -> Any:
    table = cast(Table, Generation.__table__)
    stmt = insert_for(session, table).on_conflict_do_nothing(index_elements=["tenant_id", "request_id"])
    return stmt.returning(table.c.id)


def insert_generation(session: Session, new: NewGeneration, *, now: datetime) -> bool:
    """Inserts `new` QUEUED; False (nothing written) if its (tenant, request id) already names a
    generation. One statement built once, which returns nothing the caller does not know already:
    admission runs it for every request, and loading the new row as an ORM object cost more than
    the INSERT. On PostgreSQL a concurrent insert of the same key waits for the other transaction."""
    values = {
        "id": new.generation_id,
        "tenant_id": new.tenant_id,
        "request_id": new.request_id,
        "payload_sha256": new.payload_sha256,
        "model_version_id": new.model_version_id,
        "state": GenerationState.QUEUED,
        "current_epoch": None,
        "cancel_requested": False,
        "reserved_input_tokens": new.reserved_input_tokens,
        "reserved_output_tokens": new.reserved_output_tokens,
        "owner_frontend_id": new.owner_frontend_id,
        "api_key_id": new.api_key_id,
        "created_at": now,
        "updated_at": now,
    }
    return (
        session.connection().execute(built_once(session, _CREATE, _build_create), values).first() is not None
    )


def existing_generation(session: Session, new: NewGeneration) -> Generation:
    """The generation `new`'s request id names (`insert_generation` found it there); raises
    `RequestIdConflict` if it holds a different payload."""
    generation = session.scalars(
        select(Generation)
        .where(Generation.tenant_id == new.tenant_id, Generation.request_id == new.request_id)
        .execution_options(populate_existing=True)
    ).one()
    if generation.payload_sha256 != new.payload_sha256:
        raise RequestIdConflict(new.tenant_id, new.request_id, generation.id)
    return generation


def create_or_get_generation(session: Session, new: NewGeneration, *, now: datetime) -> CreateOrGet:
    """The generation for (tenant, request id): inserted QUEUED, or the existing one (read back
    either way; admission uses the two steps, which need no read-back of a new row).

    Raises `RequestIdConflict` if the request id already names a different payload.
    """
    if not insert_generation(session, new, now=now):  # a retry whose first try committed: not again
        return CreateOrGet(existing_generation(session, new), created=False)
    generation = session.get(Generation, new.generation_id, populate_existing=True)
    assert generation is not None  # inserted above, in this transaction
    return CreateOrGet(generation, created=True)


def get_generation(session: Session, tenant_id: str, generation_id: str) -> Generation:
    """The tenant's generation; `GenerationNotFound` for unknown ids and other tenants' generations."""
    generation = session.get(Generation, generation_id, populate_existing=True)
    if generation is None or generation.tenant_id != tenant_id:
        raise GenerationNotFound(generation_id)
    return generation


def find_by_request_id(session: Session, tenant_id: str, request_id: str) -> Generation | None:
    return session.scalars(
        select(Generation).where(Generation.tenant_id == tenant_id, Generation.request_id == request_id)
    ).one_or_none()


def lock_generation(session: Session, generation_id: str) -> Generation:
    """The generation, re-read under a row lock (PostgreSQL `FOR UPDATE`; SQLite holds the write lock)."""
    generation = session.get(Generation, generation_id, with_for_update=True, populate_existing=True)
    if generation is None:
        raise GenerationNotFound(generation_id)
    return generation


def stale_queued(session: Session, *, before: datetime, limit: int = 100) -> list[str]:
    """Ids of QUEUED generations last changed before `before`, oldest first: their frontend is gone
    (a live one ends its own queued generations within its tier's allowance)."""
    return list(
        session.scalars(
            select(Generation.id)
            .where(Generation.state == GenerationState.QUEUED, Generation.updated_at < before)
            .order_by(Generation.updated_at, Generation.id)
            .limit(limit)
        )
    )


@dataclass(slots=True, frozen=True)
class GenerationCounts:
    """Generations in each of the states asked for (Admin's ListGenerations), and the newest."""

    counts: dict[GenerationState, int]
    newest: list[Generation]


def generations_by_state(
    session: Session, states: frozenset[GenerationState], *, tenant_id: str = "", limit: int = 100
) -> GenerationCounts:
    """How many generations are in each of `states` (of one tenant when given), and the newest `limit`
    of them. Live states are indexed; asking for terminal ones scans their history."""
    where: list[ColumnElement[bool]] = [Generation.state.in_(states)]
    if tenant_id:
        where.append(Generation.tenant_id == tenant_id)
    counted = session.execute(select(Generation.state, func.count()).where(*where).group_by(Generation.state))
    counts = dict.fromkeys(sorted(states), 0) | {GenerationState(s): n for s, n in counted}
    newest = session.scalars(
        select(Generation).where(*where).order_by(Generation.created_at.desc(), Generation.id).limit(limit)
    ).all()
    return GenerationCounts(counts, list(newest))
