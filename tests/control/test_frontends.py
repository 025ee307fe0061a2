"""The frontend registry and generation ownership: who runs a generation, and whether it is still
there to forward a Resume or a Cancel to."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import select

from control.errors import GenerationNotFound
from control.frontends import (
    FrontendReport,
    Owner,
    announce_frontend,
    generation_owner,
    prune_frontends,
    retire_frontend,
)
from control.generations import create_or_get_generation
from control.models import Frontend
from control.states import GenerationState
from datastore.store import Store
from tests.builders import T0, TENANT, add_tenant, add_version, at, new_generation

LEASE = timedelta(seconds=6)
QUEUED = GenerationState.QUEUED


def owned(store: Store, request_id: str, owner: str | None) -> str:
    new = replace(new_generation(request_id), owner_frontend_id=owner)
    with store.transaction() as session:
        return create_or_get_generation(session, new, now=T0).generation.id


@pytest.fixture
def catalog(store: Store) -> Store:
    with store.transaction() as session:
        add_version(session)
        add_tenant(session)
    return store


def test_a_generation_names_its_owner_and_its_relay_while_the_owner_lives(catalog: Store) -> None:
    gid = owned(catalog, "r1", "f1")
    with catalog.transaction() as session:
        announce_frontend(session, FrontendReport("f1", "127.0.0.1:7001", LEASE), now=T0)
    with catalog.transaction() as session:
        assert generation_owner(session, TENANT, gid, now=at(5)) == Owner(gid, QUEUED, "f1", "127.0.0.1:7001")
        assert generation_owner(session, TENANT, gid, now=at(6)).relay_address == ""  # lease expired
        announce_frontend(session, FrontendReport("f1", "127.0.0.1:7001", LEASE, draining=True), now=at(5))
    with catalog.transaction() as session:
        assert generation_owner(session, TENANT, gid, now=at(10)).relay_address == "127.0.0.1:7001"
        frontend = session.get(Frontend, "f1")
        assert frontend is not None and (frontend.started_at, frontend.draining) == (T0, True)


def test_a_retired_or_unknown_owner_is_gone(catalog: Store) -> None:
    retired, unknown, none = (
        owned(catalog, "r1", "f1"),
        owned(catalog, "r2", "ghost"),
        owned(catalog, "r3", None),
    )
    with catalog.transaction() as session:
        announce_frontend(session, FrontendReport("f1", "127.0.0.1:7001", LEASE), now=T0)
        retire_frontend(session, "f1", now=at(1))
        retire_frontend(session, "ghost", now=at(1))  # nothing to retire: ignored
    with catalog.transaction() as session:
        assert generation_owner(session, TENANT, retired, now=at(2)).relay_address == ""
        assert generation_owner(session, TENANT, unknown, now=at(2)) == Owner(unknown, QUEUED, "ghost", "")
        assert generation_owner(session, TENANT, none, now=at(2)) == Owner(none, QUEUED, None, "")


def test_another_tenants_generation_has_no_owner_to_tell(catalog: Store) -> None:
    gid = owned(catalog, "r1", "f1")
    with catalog.transaction() as session, pytest.raises(GenerationNotFound):
        generation_owner(session, "other-tenant", gid, now=T0)


def test_long_expired_registrations_are_pruned(catalog: Store) -> None:
    with catalog.transaction() as session:
        announce_frontend(session, FrontendReport("old", "", LEASE), now=T0)
        announce_frontend(session, FrontendReport("new", "", LEASE), now=at(100))
        assert prune_frontends(session, expired_before=at(50)) == 1
    with catalog.transaction() as session:
        assert session.scalars(select(Frontend.id)).all() == ["new"]


def test_a_registration_needs_an_id_and_a_positive_lease() -> None:
    with pytest.raises(ValueError, match="id"):
        FrontendReport("", "", LEASE)
    with pytest.raises(ValueError, match="lease_for"):
        FrontendReport("f1", "", timedelta(0))
