from __future__ import annotations

import hashlib
from datetime import timedelta

import grpc
import pytest

from control.api_keys import hash_api_key
from control.directory import KeyEntry, TenantEntry
from frontend.auth import ApiKeyStore
from tests.builders import T0, at
from tests.refusals import refused


def entry(tenant_id: str, *keys: str, weight: float = 1.0) -> TenantEntry:
    return TenantEntry(
        tenant_id,
        weight,
        tuple(KeyEntry(f"key_{k}", hash_api_key(k), ("generate", "usage"), None) for k in keys),
    )


STORE = ApiKeyStore([entry("a", "key-a", weight=2.0), entry("b", "key-b1", "key-b2")])


def test_bearer_key_resolves_its_tenant() -> None:
    assert STORE.authenticate([("authorization", "Bearer key-a")]).id == "a"
    assert STORE.authenticate([("authorization", "bearer key-b2")]).id == "b"
    assert STORE.authenticate([("x", "y"), ("authorization", b"Bearer key-b1")]).weight == 1.0


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ([], "missing authorization"),
        (None, "missing authorization"),
        ([("authorization", "key-a")], "Bearer"),
        ([("authorization", "Basic key-a")], "Bearer"),
        ([("authorization", "Bearer ")], "Bearer"),
        ([("authorization", "Bearer key-c")], "invalid API key"),
    ],
)
def test_bad_credentials_are_unauthenticated(metadata, message: str) -> None:
    with refused(match=message) as e:
        STORE.authenticate(metadata)
    assert e.value.code is grpc.StatusCode.UNAUTHENTICATED


def test_admin_keys_open_admin_only_and_tenant_keys_never_do() -> None:
    keys = ApiKeyStore([entry("t1", "k1")], admin_keys=("root",))
    keys.authenticate_admin([("authorization", "Bearer root")])
    with refused() as e:
        keys.authenticate_admin([("authorization", "Bearer k1")])
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ADMIN_REQUIRED")
    with refused() as e:
        keys.authenticate([("authorization", "Bearer root")])
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_A_TENANT")
    with refused() as e:
        keys.authenticate_admin([("authorization", "Bearer wrong")])
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED


def test_replace_swaps_the_tenant_keys_and_keeps_the_admin_keys() -> None:
    keys = ApiKeyStore([entry("t1", "k1")], admin_keys=("root",))
    keys.replace([entry("t2", "k2", weight=3.0)])
    assert keys.authenticate([("authorization", "Bearer k2")]).weight == 3.0
    with refused() as e:
        keys.authenticate([("authorization", "Bearer k1")])
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    keys.authenticate_admin([("authorization", "Bearer root")])


def test_admin_calls_name_their_operator_and_key_and_a_fetch_key_opens_only_fetches() -> None:
    keys = ApiKeyStore([entry("t1", "k1")], admin_keys=("root",), fetch_keys=("wk", ""))
    fingerprint = hashlib.sha256(b"root").hexdigest()[:8]
    assert keys.authenticate_admin([("authorization", "Bearer root")]) == f"admin (key {fingerprint})"
    named = [("authorization", "Bearer root"), ("x-operator", "ann\x1b[2J")]  # control characters dropped
    assert keys.authenticate_admin(named) == f"ann[2J (key {fingerprint})"
    assert keys.authenticate_fetch([("authorization", "Bearer wk")]) == "worker"
    assert keys.authenticate_fetch([("authorization", "Bearer root")]) == f"admin (key {fingerprint})"
    with refused() as e:  # the worker key opens no other Admin call
        keys.authenticate_admin([("authorization", "Bearer wk")])
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with refused() as e:
        keys.authenticate_fetch([("authorization", "Bearer k1")])
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ADMIN_REQUIRED")
    with refused() as e:  # an empty fetch key (no [fleet] worker_key) opens nothing
        keys.authenticate_fetch([("authorization", "Bearer ")])
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self):
        return self.now


def bearer(key: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {key}")]


def test_a_call_carries_its_key_and_the_key_needs_the_call_s_scope() -> None:
    only_usage = KeyEntry("key_u", hash_api_key("ku"), ("usage",), None)
    keys = ApiKeyStore([TenantEntry("t", 2.0, (only_usage,), disabled=True, allowed_models=("m",))])
    tenant = keys.authenticate(bearer("ku"), "usage")
    assert (tenant.id, tenant.key_id, tenant.scopes, tenant.disabled, tenant.allowed_models) == (
        "t",
        "key_u",
        ("usage",),
        True,
        ("m",),
    )
    assert keys.authenticate(bearer("ku")).key_id == "key_u"  # no scope asked
    with refused() as e:
        keys.authenticate(bearer("ku"), "generate")
    assert (e.value.code, e.value.reason) == (grpc.StatusCode.PERMISSION_DENIED, "INSUFFICIENT_SCOPE")


def test_expired_keys_and_a_rotation_s_old_secret_past_its_overlap_are_refused() -> None:
    clock = Clock()
    rotated = KeyEntry("key_r", hash_api_key("new"), ("generate",), None, hash_api_key("old"), at(60))
    expiring = KeyEntry("key_e", hash_api_key("brief"), ("generate",), at(30))
    keys = ApiKeyStore([TenantEntry("t", 1.0, (rotated, expiring))], clock=clock)
    assert {keys.authenticate(bearer(k)).key_id for k in ("new", "old", "brief")} == {"key_r", "key_e"}
    clock.now = at(30)
    with refused(match="expired") as e:
        keys.authenticate(bearer("brief"))
    assert e.value.code is grpc.StatusCode.UNAUTHENTICATED
    keys.authenticate(bearer("old"))
    clock.now = at(60) + timedelta(microseconds=1)
    with refused(match="expired"):
        keys.authenticate(bearer("old"))
    assert keys.authenticate(bearer("new")).key_id == "key_r"


def test_the_keys_used_are_gathered_for_the_catalog_refresh_to_record() -> None:
    clock = Clock()
    keys = ApiKeyStore([entry("a", "k1", "k2")], clock=clock)
    keys.authenticate(bearer("k1"))
    clock.now = at(5)
    keys.authenticate(bearer("k1"))
    with refused():
        keys.authenticate(bearer("nobody"))
    assert keys.drain_used() == {"key_k1": at(5)}
    assert keys.drain_used() == {}
