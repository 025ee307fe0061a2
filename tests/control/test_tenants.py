from __future__ import annotations

import pytest
from sqlalchemy import select

from config.settings import TenantSpec
from control.errors import ApiKeyConflict
from control.models import ApiKey
from control.tenants import hash_api_key, tenant_for_api_key, upsert_tenant
from datastore.store import Store
from tests.builders import T0, at


def keys(store: Store) -> list[tuple[str, str]]:
    with store.transaction() as session:
        return [
            (k.tenant_id, k.key_sha256) for k in session.scalars(select(ApiKey).order_by(ApiKey.key_sha256))
        ]


def test_a_tenant_is_stored_with_hashed_keys_and_found_by_key(store: Store) -> None:
    spec = TenantSpec("acme", ("k1", "k2"), weight=2.0, max_concurrent_generations=3, max_queued_tokens=900)
    with store.transaction() as session:
        upsert_tenant(session, spec, now=T0)
    assert keys(store) == sorted(
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


def test_upsert_replaces_quotas_and_keys(store: Store) -> None:
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("acme", ("k1", "k2")), now=T0)
    with store.transaction() as session:
        tenant = upsert_tenant(
            session, TenantSpec("acme", ("k2", "k3"), output_tokens_per_minute=7), now=at(1)
        )
        assert (tenant.output_tokens_per_minute, tenant.created_at, tenant.updated_at) == (7, T0, at(1))
    assert {d for _, d in keys(store)} == {hash_api_key("k2"), hash_api_key("k3")}
    with store.transaction() as session:
        assert tenant_for_api_key(session, "k1") is None


def test_a_key_held_by_another_tenant_is_refused(store: Store) -> None:
    with store.transaction() as session:
        upsert_tenant(session, TenantSpec("a", ("shared",)), now=T0)
    with pytest.raises(ApiKeyConflict), store.transaction() as session:
        upsert_tenant(session, TenantSpec("b", ("mine", "shared")), now=T0)
    assert keys(store) == [("a", hash_api_key("shared"))]


def test_invalid_tenants_are_refused() -> None:
    with pytest.raises(ValueError, match="id"):
        TenantSpec("")
    with pytest.raises(ValueError, match="weight"):
        TenantSpec("a", weight=0)
    with pytest.raises(ValueError, match="between 0 and 2147483647"):
        TenantSpec("a", max_queued_tokens=-1)
    with pytest.raises(ValueError, match="between 0 and 2147483647"):
        TenantSpec("a", input_tokens_per_minute=2**31)
