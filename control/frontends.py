"""The frontend registry: each frontend replica announces itself (where its internal relay listens)
and extends its lease while it runs; a clean exit ends the lease at once. A frontend whose lease has
expired is gone. Each generation records the frontend running it (its owner), so a Resume or a
Cancel reaching another frontend can be forwarded to the owner's relay while it lives, and answered
from the store once it is gone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.orm import Session

from control.generations import get_generation
from control.models import Frontend
from control.states import GenerationState


@dataclass(slots=True, frozen=True)
class FrontendReport:
    frontend_id: str
    relay_address: str  # host:port of its internal relay ("" when it serves none)
    lease_for: timedelta  # the registration holds this long past the announcement
    draining: bool = False  # finishing its generations, admitting none

    def __post_init__(self) -> None:
        if not self.frontend_id:
            raise ValueError("a frontend needs an id")
        if self.lease_for <= timedelta(0):
            raise ValueError("lease_for must be positive")


@dataclass(slots=True, frozen=True)
class Owner:
    """Who runs a generation, as the store knows it."""

    generation_id: str
    state: GenerationState
    frontend_id: str | None  # None: admitted before frontends were recorded
    relay_address: str  # the owner's relay while its registration is live; "" once it is gone


def announce_frontend(session: Session, report: FrontendReport, *, now: datetime) -> Frontend:
    """Creates or refreshes the frontend's registration and extends its lease."""
    frontend = session.get(Frontend, report.frontend_id, with_for_update=True, populate_existing=True)
    if frontend is None:
        frontend = Frontend(id=report.frontend_id, started_at=now)
        session.add(frontend)
    frontend.relay_address = report.relay_address
    frontend.heartbeat_at = now
    frontend.lease_expires_at = now + report.lease_for
    frontend.draining = report.draining
    session.flush()
    return frontend


def retire_frontend(session: Session, frontend_id: str, *, now: datetime) -> None:
    """A clean exit: the registration ends now (nothing is forwarded to it any more)."""
    frontend = session.get(Frontend, frontend_id, with_for_update=True, populate_existing=True)
    if frontend is not None and frontend.lease_expires_at > now:
        frontend.lease_expires_at = now


def prune_frontends(session: Session, *, expired_before: datetime) -> int:
    """Deletes registrations that expired before `expired_before` (their generations keep the
    owner's id: a missing registration reads as gone). Returns how many."""
    gone = session.execute(delete(Frontend).where(Frontend.lease_expires_at < expired_before))
    return int(gone.rowcount)  # type: ignore[attr-defined]


def generation_owner(session: Session, tenant_id: str, generation_id: str, *, now: datetime) -> Owner:
    """The tenant's generation's owner; `GenerationNotFound` for unknown ids and other tenants'."""
    generation = get_generation(session, tenant_id, generation_id)
    address = ""
    if generation.owner_frontend_id is not None:
        frontend = session.get(Frontend, generation.owner_frontend_id, populate_existing=True)
        if frontend is not None and frontend.lease_expires_at > now:
            address = frontend.relay_address
    return Owner(generation.id, generation.state, generation.owner_frontend_id, address)
