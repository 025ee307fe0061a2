"""API-key authentication: `authorization: Bearer <key>` metadata -> tenant, for every transport.

Keys are kept only as sha256 digests. On gRPC an interceptor (frontend/rpc/interceptors.py)
resolves the tenant before any handler runs and hands it to the handler through a context
variable; health and reflection need no key. Admin
calls need an admin key: a tenant's key there is PERMISSION_DENIED, as is an admin key on the
tenant services (an operator is not a tenant).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from control.tenants import TenantEntry
from frontend.refusals import NotAuthenticated, NotPermitted

_current_tenant: contextvars.ContextVar[Tenant] = contextvars.ContextVar("tenant")
_current_admin: contextvars.ContextVar[str] = contextvars.ContextVar("admin", default="admin")
OPERATOR_HEADER = "x-operator"  # who is at the keyboard, recorded with Admin changes (llmctl sends $USER)


@dataclass(slots=True, frozen=True)
class Tenant:
    id: str
    weight: float  # its share in weighted fair queuing


def enter(principal: Tenant | str) -> None:
    """The running call is the tenant's (a str: an admin call, by that admin; see `current_admin`);
    the gRPC interceptor (frontend/rpc/interceptors.py) calls this before the handler runs."""
    if isinstance(principal, Tenant):
        _current_tenant.set(principal)
    else:
        _current_admin.set(principal)


def current_tenant() -> Tenant:
    """The authenticated tenant of the running call."""
    return _current_tenant.get()


def current_admin() -> str:
    """Who makes the running Admin call: "<operator> (key <fingerprint>)", the operator from the
    `x-operator` metadata (else "admin"), the fingerprint the first 8 hex digits of the key's sha256."""
    return _current_admin.get()


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ApiKeyStore:
    """Key digests -> principals: the store's tenants (a cache, `replace`d when the catalog
    changes, frontend/catalog/cache.py) and this frontend's admin keys (from its config)."""

    def __init__(
        self,
        tenants: Iterable[TenantEntry] = (),
        admin_keys: Iterable[str] = (),
        fetch_keys: Iterable[str] = (),
    ) -> None:
        """fetch_keys: keys that may call FetchArtifactFile only (worker hosts: [fleet] worker_key)."""
        self._admin = {_digest(key) for key in admin_keys}
        self._fetch = {_digest(key) for key in fetch_keys if key}
        self._by_digest: dict[bytes, Tenant | None] = {}  # None: an admin key
        self.replace(tenants)

    def replace(self, tenants: Iterable[TenantEntry]) -> None:
        by_digest: dict[bytes, Tenant | None] = dict.fromkeys(self._admin)
        for t in tenants:
            for digest in t.key_sha256:
                by_digest.setdefault(bytes.fromhex(digest), Tenant(t.id, t.weight))
        self._by_digest = by_digest

    def authenticate(self, metadata: Iterable[tuple[str, Any]] | None) -> Tenant:
        """The tenant of a tenant key; PERMISSION_DENIED for an admin key."""
        principal = self._principal(metadata)
        if principal is None:
            raise NotPermitted("NOT_A_TENANT", "an admin key cannot call tenant services")
        return principal

    def authenticate_admin(self, metadata: Iterable[tuple[str, Any]] | None) -> str:
        """The admin's name (see `current_admin`) for an admin key; PERMISSION_DENIED for a tenant's key."""
        if self._principal(metadata) is not None:
            raise NotPermitted("ADMIN_REQUIRED", "this call needs an admin key")
        headers = {
            k: v.decode(errors="replace") if isinstance(v, bytes) else str(v) for k, v in metadata or ()
        }
        key = headers["authorization"].partition(" ")[2].strip()
        operator = "".join(c for c in headers.get(OPERATOR_HEADER, "")[:64] if c.isprintable()) or "admin"
        return f"{operator} (key {_digest(key).hex()[:8]})"

    def authenticate_fetch(self, metadata: Iterable[tuple[str, Any]] | None) -> str:
        """A worker host's fetch key passes as "worker"; anything else as `authenticate_admin`."""
        header = next((v for k, v in metadata or () if k == "authorization"), None)
        if isinstance(header, bytes):
            header = header.decode(errors="replace")
        key = str(header or "").partition(" ")[2].strip()
        if key and any(hmac.compare_digest(d, _digest(key)) for d in self._fetch):
            return "worker"
        return self.authenticate_admin(metadata)

    def _principal(self, metadata: Iterable[tuple[str, Any]] | None) -> Tenant | None:
        header = next((v for k, v in metadata or () if k == "authorization"), None)
        if header is None:
            raise NotAuthenticated("missing authorization metadata (expected 'Bearer <api key>')")
        if isinstance(header, bytes):
            header = header.decode(errors="replace")
        scheme, _, key = str(header).partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise NotAuthenticated("authorization must be 'Bearer <api key>'")
        digest = _digest(key.strip())
        for candidate, tenant in self._by_digest.items():
            if hmac.compare_digest(candidate, digest):
                return tenant
        raise NotAuthenticated("invalid API key")
