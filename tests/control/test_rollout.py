"""Roll-out in the store: recorded route changes, canary, promote, rollback (a second one undoes
the first), retirement's two steps and its refusals, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from control.errors import (
    CanaryAmbiguous,
    NoPreviousRoute,
    UnknownModelVersion,
    VersionNotServable,
    VersionRouted,
)
from control.model_versions import alias_routes, set_alias_route
from control.models import Generation, ModelVersion, ModelVersionStatus
from control.rollout import (
    active_generations,
    begin_retire,
    canary,
    canary_route,
    change_route,
    finish_retire,
    list_changes,
    promote,
    rollback,
)
from control.states import GenerationState
from datastore.store import Store
from tests.builders import T0, add_version, at, running, seed, version_spec

V1, V2, V3 = "smollm2-135m@v1", "smollm2-135m@v2", "smollm2-135m@v3"
V = ModelVersionStatus


def two_versions(store: Store) -> None:
    seed(store)  # v1 and the default tenant
    with store.transaction() as s:
        add_version(s, version_spec(version="v2", weights="w2"))
        change_route(s, "smol", {V1: 100.0}, actor="config", now=T0)


def test_canary_route_shares_the_rest_in_proportion() -> None:
    assert canary_route({V1: 100.0}, V2, 10) == {V1: 90.0, V2: 10.0}
    assert canary_route({V1: 30.0, V3: 10.0}, V2, 50) == {V1: 37.5, V3: 12.5, V2: 50.0}
    assert canary_route({V1: 50.0, V2: 50.0}, V2, 20) == {V1: 80.0, V2: 20.0}  # its own leg is replaced
    for percent in (0, 100):
        assert canary_route({V1: 100.0}, V2, percent) == {V2: 100.0}
    assert canary_route({}, V2, 10) == {V2: 100.0}  # a new alias


def test_canary_promote_rollback_are_recorded_with_who_and_when(store: Store) -> None:
    two_versions(store)
    with store.transaction() as s:
        assert canary(s, "smol", V2, 50, actor="ann (key 1)", now=at(1)) == {V1: 50.0, V2: 50.0}
    with store.transaction() as s:
        assert promote(s, "smol", "", actor="ann (key 1)", now=at(2)) == {V2: 100.0}  # the canary: a tie
    with store.transaction() as s:
        assert alias_routes(s, "smol") == {V2: 100.0}
        assert rollback(s, "smol", actor="bob (key 2)", now=at(3)) == {V1: 50.0, V2: 50.0}
    with store.transaction() as s:  # a second rollback undoes the first
        assert rollback(s, "smol", actor="bob (key 2)", now=at(4)) == {V2: 100.0}
    with store.transaction() as s:
        changes = list_changes(s)
    assert [(c.at, c.actor, c.action, c.alias, c.before, c.after) for c in changes] == [
        (at(4), "bob (key 2)", "ROLLBACK", "smol", {V1: 50.0, V2: 50.0}, {V2: 100.0}),
        (at(3), "bob (key 2)", "ROLLBACK", "smol", {V2: 100.0}, {V1: 50.0, V2: 50.0}),
        (at(2), "ann (key 1)", "PROMOTE", "smol", {V1: 50.0, V2: 50.0}, {V2: 100.0}),
        (at(1), "ann (key 1)", "CANARY", "smol", {V1: 100.0}, {V1: 50.0, V2: 50.0}),
        (T0, "config", "SET_ROUTE", "smol", {}, {V1: 100.0}),
    ]


def test_promote_and_rollback_refusals_change_nothing(store: Store) -> None:
    two_versions(store)
    with pytest.raises(CanaryAmbiguous), store.transaction() as s:  # one leg: no canary to promote
        promote(s, "smol", "", actor="a", now=at(1))
    with pytest.raises(UnknownModelVersion), store.transaction() as s:
        promote(s, "nothing-here", V1, actor="a", now=at(1))
    with pytest.raises(UnknownModelVersion), store.transaction() as s:
        promote(s, "smol", "smollm2-135m@nope", actor="a", now=at(1))
    with pytest.raises(NoPreviousRoute), store.transaction() as s:  # its first route had no before
        rollback(s, "smol", actor="a", now=at(1))
    with pytest.raises(NoPreviousRoute), store.transaction() as s:
        rollback(s, "never-routed", actor="a", now=at(1))
    with store.transaction() as s:
        assert alias_routes(s, "smol") == {V1: 100.0}
        assert len(list_changes(s)) == 1


def test_retire_is_refused_while_routed_then_drains_until_generations_end(store: Store) -> None:
    two_versions(store)
    lease = running(store, "r1")  # pinned to v1
    with pytest.raises(VersionRouted) as refused, store.transaction() as s:
        begin_retire(s, V1, actor="a", now=at(1))
    assert refused.value.aliases == ("smol",)
    with store.transaction() as s:
        assert s.get(ModelVersion, V1).status is V.READY  # type: ignore[union-attr]
        change_route(s, "smol", {V2: 100.0}, actor="a", now=at(2))
    with store.transaction() as s:
        assert begin_retire(s, V1, actor="a", now=at(3)).status is V.DRAINING
        assert active_generations(s, V1) == 1
    with pytest.raises(VersionNotServable), store.transaction() as s:  # no new route to it
        set_alias_route(s, "other", {V1: 1.0}, now=at(4))
    with store.transaction() as s:
        generation = s.get(Generation, lease.generation_id)
        assert generation is not None
        generation.state = GenerationState.COMPLETED
    with store.transaction() as s:
        assert active_generations(s, V1) == 0
        assert finish_retire(s, V1, actor="a", now=at(5)).status is V.RETIRED
        assert begin_retire(s, V1, actor="a", now=at(6)).status is V.RETIRED  # idempotent
        assert [c.action for c in list_changes(s, 2)] == ["RETIRED", "RETIRE"]
    with pytest.raises(UnknownModelVersion), store.transaction() as s:
        begin_retire(s, "smollm2-135m@nope", actor="a", now=at(7))


def test_a_registered_version_never_served_retires_at_once(store: Store) -> None:
    seed(store)
    with store.transaction() as s:
        add_version(s, version_spec(version="v3", weights="w3"), ready=False)
    with store.transaction() as s:
        assert begin_retire(s, V3, actor="a", now=at(1)).status is V.RETIRED
    with pytest.raises(VersionNotServable), store.transaction() as s:
        finish_retire(s, V1, actor="a", now=at(2))  # READY: not retiring
