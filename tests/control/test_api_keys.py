from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from control.api_keys import (
    KeySettings,
    KeyUpdate,
    create_key,
    hash_api_key,
    list_keys,
    revoke_key,
    rotate_key,
    touch_keys,
    update_key,
)
from control.directory import tenant_directory
from control.errors import ApiKeyNotFound, ApiKeyRevoked, InvalidSetting, TenantNotFound
from control.models import ApiKey
from control.revision import current_revision
from control.tenant_changes import list_changes
from datastore.store import Store
from tests.builders import T0, add_tenant, at, tenant_spec


def with_tenants(store: Store) -> None:
    with store.transaction() as session:
        add_tenant(session, tenant_spec("acme"))
        add_tenant(session, tenant_spec("other"))


def test_a_key_is_created_with_a_secret_shown_once_and_stored_as_a_digest(store: Store) -> None:
    with_tenants(store)
    settings = KeySettings(
        name="ci", scopes=("generate",), input_tokens_per_minute=100, monthly_budget_micros=5
    )
    with store.transaction() as session:
        revision = current_revision(session)
        created = create_key(session, "acme", settings, actor="ann", now=T0)
        assert current_revision(session) == revision + 1
    assert created.secret.startswith("sk-") and len(created.secret) == 46
    assert (created.key.tenant_id, created.key.settings, created.key.created_at) == ("acme", settings, T0)
    with store.transaction() as session:
        row = session.get(ApiKey, created.key.id)
        assert row is not None and row.key_sha256 == hash_api_key(created.secret)
        assert created.secret not in {str(v) for v in vars(row).values()}  # the secret is nowhere
        change = list_changes(session, tenant_id="acme")[0]
    assert (change.action, change.key_id, change.actor) == ("KEY_CREATE", created.key.id, "ann")
    assert created.secret not in str(change.detail) and change.detail["scopes"] == "generate"


def test_key_settings_are_checked() -> None:
    with pytest.raises(InvalidSetting, match="scopes"):
        KeySettings(scopes=())
    with pytest.raises(InvalidSetting, match="scopes"):
        KeySettings(scopes=("admin",))
    with pytest.raises(InvalidSetting, match="input_tokens_per_minute"):
        KeySettings(input_tokens_per_minute=-1)
    with pytest.raises(InvalidSetting, match="name"):
        KeySettings(name="x" * 201)


def test_creation_needs_a_tenant_and_a_future_expiry(store: Store) -> None:
    with_tenants(store)
    with pytest.raises(TenantNotFound), store.transaction() as session:
        create_key(session, "nobody", KeySettings(), actor="ann", now=T0)
    with pytest.raises(InvalidSetting, match="expires_at"), store.transaction() as session:
        create_key(session, "acme", KeySettings(expires_at=T0), actor="ann", now=T0)


def test_revocation_is_final_kept_and_scoped_to_the_tenant(store: Store) -> None:
    with_tenants(store)
    with store.transaction() as session:
        key = create_key(session, "acme", KeySettings(name="a"), actor="ann", now=T0).key
    with pytest.raises(ApiKeyNotFound), store.transaction() as session:  # another tenant's: not found
        revoke_key(session, key.id, actor="other", now=at(1), tenant_id="other")
    with store.transaction() as session:
        assert revoke_key(session, key.id, actor="acme", now=at(1), tenant_id="acme").revoked_at == at(1)
        assert revoke_key(session, key.id, actor="ann", now=at(2)).revoked_at == at(1)  # again: as it was
        assert [k.revoked_at for k in list_keys(session, "acme") if k.id == key.id] == [at(1)]
        assert key.id not in {k.id for e in tenant_directory(session) for k in e.keys}
    with pytest.raises(ApiKeyRevoked), store.transaction() as session:
        rotate_key(session, key.id, overlap=timedelta(0), actor="ann", now=at(3))
    with pytest.raises(ApiKeyRevoked), store.transaction() as session:
        update_key(session, key.id, KeyUpdate(name="b"), actor="ann", now=at(3))


def test_rotation_keeps_the_id_and_accepts_the_old_secret_for_the_overlap(store: Store) -> None:
    with_tenants(store)
    with store.transaction() as session:
        first = create_key(session, "acme", KeySettings(), actor="ann", now=T0)
        second = rotate_key(session, first.key.id, overlap=timedelta(hours=1), actor="ann", now=at(10))
    assert second.key.id == first.key.id and second.secret != first.secret
    assert second.key.previous_expires_at == at(3610)
    with store.transaction() as session:
        (entry,) = [k for e in tenant_directory(session) for k in e.keys if k.id == first.key.id]
        third = rotate_key(session, first.key.id, overlap=timedelta(0), actor="ann", now=at(20))
    assert (entry.sha256, entry.previous_sha256) == (hash_api_key(second.secret), hash_api_key(first.secret))
    with store.transaction() as session:  # a second rotation: the first secret is gone at once
        (entry,) = [k for e in tenant_directory(session) for k in e.keys if k.id == first.key.id]
    assert (entry.sha256, entry.previous_sha256) == (hash_api_key(third.secret), hash_api_key(second.secret))
    assert entry.previous_expires_at == at(20)
    for overlap in (timedelta(seconds=-1), timedelta(days=367)):
        with pytest.raises(InvalidSetting, match="overlap"), store.transaction() as session:
            rotate_key(session, first.key.id, overlap=overlap, actor="ann", now=at(30))


def test_an_update_changes_what_it_names_and_clears_limits(store: Store) -> None:
    with_tenants(store)
    with store.transaction() as session:
        key = create_key(
            session, "acme", KeySettings(name="a", output_tokens_per_minute=9), actor="ann", now=T0
        ).key
        changed = update_key(session, key.id, KeyUpdate(monthly_budget_micros=7), actor="ann", now=at(1))
        assert (changed.settings.name, changed.settings.output_tokens_per_minute) == ("a", 9)
        assert changed.settings.monthly_budget_micros == 7
        cleared = KeyUpdate(clear=frozenset({"output_tokens_per_minute", "monthly_budget_micros"}))
        changed = update_key(session, key.id, cleared, actor="ann", now=at(2))
    assert (changed.settings.output_tokens_per_minute, changed.settings.monthly_budget_micros) == (None, None)


def test_last_used_only_moves_forward(store: Store) -> None:
    with_tenants(store)
    with store.transaction() as session:
        key = create_key(session, "acme", KeySettings(), actor="ann", now=T0).key
        touch_keys(session, {key.id: at(5)})
        touch_keys(session, {key.id: at(3), "key_unknown": at(9)})
    with store.transaction() as session:
        assert session.scalar(select(ApiKey.last_used_at).where(ApiKey.id == key.id)) == at(5)
