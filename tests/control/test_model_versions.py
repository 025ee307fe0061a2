from __future__ import annotations

import dataclasses

import pytest

from control.errors import InvalidAlias, InvalidRoute, ModelVersionConflict, UnknownModelVersion
from control.model_versions import (
    alias_routes,
    all_routes,
    pick_target,
    register_version,
    resolve_model,
    route_origin,
    set_alias_route,
    set_version_status,
)
from control.models import ModelVersionStatus, RouteOrigin
from control.revision import current_revision
from datastore.store import Store
from tests.builders import T0, add_version, at, version_spec

V = ModelVersionStatus


def test_registering_is_idempotent_and_versions_are_immutable(store: Store) -> None:
    spec = version_spec()
    with store.transaction() as session:
        first = register_version(session, spec, now=T0)
        assert (first.id, first.status, first.adapter) == ("smollm2-135m@v1", V.REGISTERED, None)
    with store.transaction() as session:
        assert register_version(session, spec, now=at(1)).created_at == T0
    with pytest.raises(ModelVersionConflict), store.transaction() as session:
        register_version(session, version_spec(weights="other"), now=at(2))
    with pytest.raises(ModelVersionConflict), store.transaction() as session:
        register_version(session, dataclasses.replace(spec, adapter="lora@abc"), now=at(2))


def test_version_status_follows_its_table(store: Store) -> None:
    with store.transaction() as session:
        add_version(session, ready=False)
    path = [V.READY, V.DRAINING, V.READY, V.DRAINING, V.RETIRED]
    for status in path:
        with store.transaction() as session:
            assert set_version_status(session, "smollm2-135m@v1", status, now=at(1)).status is status
    for status in (V.READY, V.DRAINING, V.REGISTERED):
        with pytest.raises(ValueError, match="not allowed"), store.transaction() as session:
            set_version_status(session, "smollm2-135m@v1", status, now=at(2))
    with pytest.raises(UnknownModelVersion), store.transaction() as session:
        set_version_status(session, "nope@v0", V.READY, now=at(2))


def test_an_alias_splits_by_weight(store: Store) -> None:
    with store.transaction() as session:
        add_version(session, version_spec(version="v1"))
        add_version(session, version_spec(version="v2", weights="w2"))
        set_alias_route(session, "smol", {"smollm2-135m@v1": 9.0, "smollm2-135m@v2": 1.0}, now=T0)
    with store.transaction() as session:
        assert alias_routes(session, "smol") == {"smollm2-135m@v1": 9.0, "smollm2-135m@v2": 1.0}
        picks = [resolve_model(session, "smol", draw=d).id for d in (0.0, 0.5, 0.899, 0.9, 0.999)]
    assert picks == ["smollm2-135m@v1"] * 3 + ["smollm2-135m@v2"] * 2


def test_only_ready_versions_are_resolved(store: Store) -> None:
    with store.transaction() as session:
        add_version(session, version_spec(version="v1"))
        add_version(session, version_spec(version="v2", weights="w2"), ready=False)
        set_alias_route(session, "smol", {"smollm2-135m@v1": 1.0, "smollm2-135m@v2": 1.0}, now=T0)
    with store.transaction() as session:
        assert resolve_model(session, "smol", draw=0.99).id == "smollm2-135m@v1"
        assert resolve_model(session, "smollm2-135m@v1", draw=0.0).id == "smollm2-135m@v1"
        for model in ("smollm2-135m@v2", "smollm2-135m@v9", "other"):
            with pytest.raises(UnknownModelVersion):
                resolve_model(session, model, draw=0.0)
        set_version_status(session, "smollm2-135m@v1", V.DRAINING, now=at(1))
        with pytest.raises(UnknownModelVersion):
            resolve_model(session, "smol", draw=0.0)


def test_a_route_is_replaced_whole_and_validated(store: Store) -> None:
    with store.transaction() as session:
        add_version(session, version_spec(version="v1"))
        add_version(session, version_spec(version="v2", weights="w2"))
        set_alias_route(session, "smol", {"smollm2-135m@v1": 1.0}, now=T0, origin=RouteOrigin.CONFIG)
        assert route_origin(session, "smol") is RouteOrigin.CONFIG
        set_alias_route(session, "smol", {"smollm2-135m@v2": 3.0}, now=T0)
        assert alias_routes(session, "smol") == {"smollm2-135m@v2": 3.0}
        assert route_origin(session, "smol") is RouteOrigin.ADMIN
        assert route_origin(session, "other") is None
        with pytest.raises(UnknownModelVersion):
            set_alias_route(session, "smol", {"smollm2-135m@v9": 1.0}, now=T0)
        for bad in ({}, {"smollm2-135m@v1": 0.0}):
            with pytest.raises(InvalidRoute):
                set_alias_route(session, "smol", bad, now=T0)
        for alias in ("a@b", "", "x" * 129):
            with pytest.raises(InvalidAlias):
                set_alias_route(session, alias, {"smollm2-135m@v1": 1.0}, now=T0)
        with pytest.raises(ValueError, match=r"\[0, 1\)"):
            resolve_model(session, "smol", draw=1.0)
        assert alias_routes(session, "smol") == {"smollm2-135m@v2": 3.0}


def test_pick_target_splits_the_unit_interval_by_weight_in_version_order() -> None:
    route = {"m@b": 1.0, "m@a": 3.0}
    assert [pick_target(route, d) for d in (0.0, 0.74, 0.75, 0.999)] == ["m@a", "m@a", "m@b", "m@b"]
    with pytest.raises(ValueError):
        pick_target(route, -0.1)


def test_every_catalog_write_moves_the_revision(store: Store) -> None:
    with store.transaction() as session:
        start = current_revision(session)
        register_version(session, version_spec(), now=T0)
        assert current_revision(session) == start + 1
        register_version(session, version_spec(), now=T0)  # the same again: no change
        set_version_status(session, "smollm2-135m@v1", V.READY, now=T0)
        assert current_revision(session) == start + 2
        set_version_status(session, "smollm2-135m@v1", V.READY, now=T0)
        set_alias_route(session, "smol", {"smollm2-135m@v1": 1.0}, now=T0)
        assert current_revision(session) == start + 3
        assert all_routes(session) == {"smol": {"smollm2-135m@v1": 1.0}}
