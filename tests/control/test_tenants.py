from __future__ import annotations

import pytest
from sqlalchemy import select

from config.settings import TenantSpec
from control.api_keys import hash_api_key
from control.directory import tenant_directory, tenant_for_api_key
from control.errors import ApiKeyConflict, InvalidSetting, TenantExists, TenantNotFound
from control.models import ApiKey
from control.revision import current_revision
from control.tenant_changes import list_changes
from control.tenants import (
    TenantSettings,
    TenantUpdate,
    create_tenant,
    get_tenant,
    list_tenants,
    set_tenant_disabled,
    update_tenant,
    upsert_tenant,
)
from datastore.store import Store
from tests.builders import T0, at


def active_keys(store: Store) -> list[tuple[str, str]]:
    """(tenant, digest) of every key not revoked."""
    with store.transaction() as session:
        query = select(ApiKey).where(ApiKey.revoked_at.is_(None)).order_by(ApiKey.key_sha256)
        return [(k.tenant_id, k.key_sha256) for k in session.scalars(query)]


def test_a_tenant_is_stored_with_hashed_keys_and_found_by_key(store: Store) -> None:
    spec = TenantSpec("acme", ("k1", "k2"), weight=2.0, max_concurrent_generations=3, max_queued_tokens=900)
    with store.transaction() as session:
        upsert_tenant(session, spec, now=T0)
    assert active_keys(store) == sorted(
        [("acme", hash_api_key("k1")), ("acme", hash_api_key("k2"))], key=lambda k: k[1]
    )
    assert hash_api_key("k1") == "6ab9f1eb8f7d3388f4f9d586f66e99fd54080df2c446f0e58668b09c08a16dd0"
    with store.transaction() as session:
        tenant = tenant_for_api_key(session, "k2")
        assert tenant is not None
        assert (tenant.id, tenant.weight, tenant.max_concurrent_generations, tenant.max_queued_tokens) == (
            "acme",
            2.0,
            3,
            900,
        )
        assert tenant_for_api_key(session, "k3") is None
        keys = session.scalars(select(ApiKey)).all()
        assert {(k.origin, k.scopes, k.name) for k in keys} == {("config", "generate,usage", "config")}
        assert all(k.id.startswith("key_") and len(k.id) == 20 for k in keys)


def test_upsert_replaces_quotas_and_revokes_dropped_config_keys(store: Store) -> None:
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("acme", ("k1", "k2")), now=T0)
    with store.transaction() as session:
        tenant = upsert_tenant(
            session, TenantSpec("acme", ("k2", "k3"), output_tokens_per_minute=7), now=at(1)
        )
        assert (tenant.output_tokens_per_minute, tenant.created_at, tenant.updated_at) == (7, T0, at(1))
    assert {d for _, d in active_keys(store)} == {hash_api_key("k2"), hash_api_key("k3")}
    with store.transaction() as session:
        assert tenant_for_api_key(session, "k1") is None
        revoked = session.scalars(select(ApiKey).where(ApiKey.key_sha256 == hash_api_key("k1"))).one()
        assert revoked.revoked_at == at(1)  # kept, never accepted again
    with store.transaction() as session:  # the config listing k1 again does not bring it back
        upsert_tenant(session, TenantSpec("acme", ("k1", "k2", "k3")), now=at(2))
    assert hash_api_key("k1") not in {d for _, d in active_keys(store)}


def test_a_key_held_by_another_tenant_is_refused(store: Store) -> None:
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("a", ("shared",)), now=T0)
    with pytest.raises(ApiKeyConflict), store.transaction() as session:
        upsert_tenant(session, TenantSpec("b", ("mine", "shared")), now=T0)
    assert active_keys(store) == [("a", hash_api_key("shared"))]


def test_invalid_tenants_are_refused() -> None:
    with pytest.raises(ValueError, match="id"):
        TenantSpec("")
    with pytest.raises(ValueError, match="weight"):
        TenantSpec("a", weight=0)
    with pytest.raises(ValueError, match="between 0 and 2147483647"):
        TenantSpec("a", max_queued_tokens=-1)
    with pytest.raises(ValueError, match="between 0 and 2147483647"):
        TenantSpec("a", input_tokens_per_minute=2**31)
    with pytest.raises(InvalidSetting, match="monthly_budget_micros"):
        TenantSettings(monthly_budget_micros=-1)
    with pytest.raises(InvalidSetting, match="monthly_budget_micros"):
        TenantSettings(monthly_budget_micros=2**62 + 1)
    for weight in (0.0, float("inf"), float("nan")):
        with pytest.raises(InvalidSetting, match="weight"):
            TenantSettings(weight=weight)
    with pytest.raises(InvalidSetting, match="models"):
        TenantSettings(allowed_models=("a,b",))


def test_tenants_are_created_changed_and_disabled_with_a_record_and_a_revision(store: Store) -> None:
    with store.transaction() as session:
        view = create_tenant(session, "newco", TenantSettings(weight=3.0), actor="ann (key 1234abcd)", now=T0)
        assert (view.id, view.settings.weight, view.disabled, view.active_keys) == ("newco", 3.0, False, 0)
        revision = current_revision(session)
    with pytest.raises(TenantExists), store.transaction() as session:
        create_tenant(session, "newco", TenantSettings(), actor="ann", now=T0)
    with pytest.raises(InvalidSetting, match="tenant_id"), store.transaction() as session:
        create_tenant(session, "bad id", TenantSettings(), actor="ann", now=T0)
    changes = TenantUpdate(max_queued_tokens=500, monthly_budget_micros=2_500_000, allowed_models=("m1",))
    with store.transaction() as session:
        view = update_tenant(session, "newco", changes, actor="ann", now=at(1))
        assert (view.settings.max_queued_tokens, view.settings.weight) == (500, 3.0)  # the rest kept
        assert (view.settings.monthly_budget_micros, view.settings.allowed_models) == (2_500_000, ("m1",))
        clear = TenantUpdate(clear=frozenset({"monthly_budget_micros", "allowed_models"}))
        view = update_tenant(session, "newco", clear, actor="ann", now=at(2))
        assert (view.settings.monthly_budget_micros, view.settings.allowed_models) == (None, ())
        assert set_tenant_disabled(session, "newco", True, actor="bob", now=at(3)).disabled
        assert set_tenant_disabled(session, "newco", True, actor="bob", now=at(4)).disabled  # again: no-op
        assert current_revision(session) == revision + 3
    with pytest.raises(TenantNotFound), store.transaction() as session:
        update_tenant(session, "nobody", TenantUpdate(weight=2.0), actor="ann", now=at(5))
    with store.transaction() as session:
        assert [t.id for t in list_tenants(session)] == ["newco"]
        assert get_tenant(session, "newco").disabled
        record = [(c.action, c.actor, c.at) for c in list_changes(session, tenant_id="newco")]
        assert list_changes(session, tenant_id="newco")[1].detail["max_queued_tokens"] == 500
    assert record == [
        ("TENANT_DISABLE", "bob", at(3)),
        ("TENANT_UPDATE", "ann", at(2)),
        ("TENANT_UPDATE", "ann", at(1)),
        ("TENANT_CREATE", "ann (key 1234abcd)", T0),
    ]


def test_the_config_no_longer_reseeds_a_tenant_admin_changed(store: Store) -> None:
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("acme", ("k1",), max_queued_tokens=100), now=T0)
        update_tenant(session, "acme", TenantUpdate(max_queued_tokens=900), actor="ann", now=at(1))
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("acme", ("k1", "k2"), max_queued_tokens=100), now=at(2))
        assert get_tenant(session, "acme").settings.max_queued_tokens == 900
    assert active_keys(store) == [("acme", hash_api_key("k1"))]


def test_the_directory_holds_active_keys_disabled_flags_and_model_lists(store: Store) -> None:
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("a", ("ka",)), now=T0)
        upsert_tenant(session, TenantSpec("b", ("kb",), weight=2.0), now=T0)
        update_tenant(session, "b", TenantUpdate(allowed_models=("m1", "m2")), actor="ann", now=T0)
        set_tenant_disabled(session, "b", True, actor="ann", now=T0)
    with store.transaction() as session:
        entries = tenant_directory(session)
    assert [(e.id, e.weight, e.disabled, e.allowed_models) for e in entries] == [
        ("a", 1.0, False, ()),
        ("b", 2.0, True, ("m1", "m2")),
    ]
    assert [(k.sha256, k.scopes) for k in entries[0].keys] == [(hash_api_key("ka"), ("generate", "usage"))]
