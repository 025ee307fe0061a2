"""A tenant's prefix-cache salt: stable for the tenant, distinct across tenants and secrets, and not
something that can be named from the tenant id."""

from __future__ import annotations

import hashlib
import hmac

from frontend.generations.cache_salt import CacheSalts

SECRET = bytes(range(32))


def test_the_same_tenant_gets_the_same_salt_and_others_another() -> None:
    salts = CacheSalts(SECRET)
    acme, again, globex = salts.for_tenant("acme"), salts.for_tenant("acme"), salts.for_tenant("globex")
    assert acme == again
    assert acme != globex
    assert CacheSalts(SECRET).for_tenant("acme") == acme  # a function of (secret, tenant) only


def test_the_salt_is_hmac_sha256_of_the_tenant_under_the_secret() -> None:
    expected = hmac.new(SECRET, b"acme", hashlib.sha256).hexdigest()
    assert CacheSalts(SECRET).for_tenant("acme") == expected
    assert len(expected) == 64


def test_knowing_the_tenant_id_is_not_enough_to_name_its_salt() -> None:
    salts = CacheSalts(SECRET)
    salt = salts.for_tenant("acme")
    assert salt != "acme" and "acme" not in salt
    assert salt != hashlib.sha256(b"acme").hexdigest()  # not an unkeyed hash either
    assert CacheSalts(bytes(32)).for_tenant("acme") != salt  # another deployment, another salt


def test_a_generated_secret_is_fresh_and_never_shown() -> None:
    a, b = CacheSalts.generate(), CacheSalts.generate()
    assert len(a.secret) == 32 and a.secret != b.secret
    assert a.for_tenant("acme") != b.for_tenant("acme")
    assert a.secret.hex() not in repr(a) and "secret" not in repr(a)
