"""The prefix-cache salt each request carries to its worker: HMAC-SHA256(secret, tenant id).

A worker shares cached KV blocks only between requests whose salt is equal (contracts/block_hash.py
chains the salt into every block's key), so the salt is a tenant's cache scope. Were it the tenant
id, anyone able to send a worker a request could name another tenant's salt and time or count
prefix-cache hits on that tenant's prompts. Derived from a secret only the frontend holds, a salt
cannot be named from outside: equal for one tenant, unrelated across tenants.

The secret is drawn when the platform starts and lives only in the frontend's memory: never on disk,
on a command line or in a request to anything but the worker. Nothing is lost by not persisting it:
the prefix cache lives in the workers' KV pools, which the platform starts and stops with itself (and
a restarted worker's pool starts empty), so no cache hit could outlive the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

SECRET_BYTES = 32


@dataclass(slots=True, frozen=True)
class CacheSalts:
    secret: bytes = field(repr=False)  # never logged or shown

    @classmethod
    def generate(cls) -> CacheSalts:
        return cls(secrets.token_bytes(SECRET_BYTES))

    def for_tenant(self, tenant_id: str) -> str:
        """The tenant's salt: 64 hex characters."""
        return hmac.new(self.secret, tenant_id.encode(), hashlib.sha256).hexdigest()
