"""API-key authentication: `authorization: Bearer <key>` metadata -> tenant, for every transport.

Keys are kept only as sha256 digests. On gRPC an interceptor (frontend/rpc/interceptors.py)
resolves the tenant before any handler runs and hands it to the handler through a context
variable; health and reflection need no key. Admin
calls need an admin key: a tenant's key there is PERMISSION_DENIED, as is an admin key on the
tenant services (an operator is not a tenant).

A tenant's key carries scopes (control/api_keys.py): a call that needs one the key lacks is
PERMISSION_DENIED/INSUFFICIENT_SCOPE. An expired key, and a rotated key's old secret past its
overlap, are UNAUTHENTICATED at once; a revoked key from this frontend's next catalog refresh (and
at once for new generations: admission reads the key in its own transaction). When each key was
last used is gathered here and written by the catalog refresh (`drain_used`).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from contracts.scopes import SCOPES
from control.directory import KeyEntry, TenantEntry
from frontend.refusals import NotAuthenticated, NotPermitted

_current_tenant: contextvars.ContextVar[Tenant] = contextvars.ContextVar("tenant")
_current_admin: contextvars.ContextVar[str] = contextvars.ContextVar("admin", default="admin")
OPERATOR_HEADER = "x-operator"  # who is at the keyboard, recorded with Admin changes (llmctl sends $USER)


@dataclass(slots=True, frozen=True)
class Tenant:
    """The tenant a call is made for, and the key it was made with."""

    id: str
    weight: float  # its share in weighted fair queuing
    key_id: str | None = None  # the API key (None: a call relayed or made inside the platform)
    scopes: tuple[str, ...] = SCOPES
    disabled: bool = False  # starts no new generation
    allowed_models: tuple[str, ...] = ()  # aliases it may use; (): every model


@dataclass(slots=True, frozen=True)
class _Secret:
    """One accepted secret: whose, and until when (None: no end)."""

    tenant: TenantEntry
    key: KeyEntry
    until: datetime | None


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


def _earliest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ApiKeyStore:
    """Key digests -> principals: the store's tenants and keys (a cache, `replace`d when the catalog
    changes, frontend/catalog/cache.py) and this frontend's admin keys (from its config)."""

    def __init__(
        self,
        tenants: Iterable[TenantEntry] = (),
        admin_keys: Iterable[str] = (),
        fetch_keys: Iterable[str] = (),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """fetch_keys: keys that may call FetchArtifactFile only (worker hosts: [fleet] worker_key)."""
        self._admin = {_digest(key) for key in admin_keys}
        self._fetch = {_digest(key) for key in fetch_keys if key}
        self._by_digest: dict[bytes, _Secret] = {}
        self._clock = clock
        self._used: dict[str, datetime] = {}  # key id -> when this frontend last accepted it
        self.replace(tenants)

    def replace(self, tenants: Iterable[TenantEntry]) -> None:
        by_digest: dict[bytes, _Secret] = {}
        for t in tenants:
            for k in t.keys:
                by_digest.setdefault(bytes.fromhex(k.sha256), _Secret(t, k, k.expires_at))
                if k.previous_sha256 is not None:
                    until = _earliest(k.previous_expires_at, k.expires_at)  # never past the key's end
                    by_digest.setdefault(bytes.fromhex(k.previous_sha256), _Secret(t, k, until))
        self._by_digest = by_digest

    def drain_used(self) -> dict[str, datetime]:
        """When each key was last accepted since the last call (and forgets it)."""
        used, self._used = self._used, {}
        return used

    def authenticate(self, metadata: Iterable[tuple[str, Any]] | None, scope: str | None = None) -> Tenant:
        """The tenant of a tenant key that holds `scope` (None: any key of the tenant);
        PERMISSION_DENIED for an admin key or a key without that scope."""
        secret = self._principal(metadata)
        if secret is None:
            raise NotPermitted("NOT_A_TENANT", "an admin key cannot call tenant services")
        now = self._clock()
        if secret.until is not None and secret.until <= now:
            raise NotAuthenticated("the API key has expired")
        key = secret.key
        if scope is not None and scope not in key.scopes:
            raise NotPermitted(
                "INSUFFICIENT_SCOPE", f"this call needs a key with the {scope!r} scope", {"scope": scope}
            )
        self._used[key.id] = now
        t = secret.tenant
        return Tenant(t.id, t.weight, key.id, key.scopes, t.disabled, t.allowed_models)

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

    def _principal(self, metadata: Iterable[tuple[str, Any]] | None) -> _Secret | None:
        header = next((v for k, v in metadata or () if k == "authorization"), None)
        if header is None:
            raise NotAuthenticated("missing authorization metadata (expected 'Bearer <api key>')")
        if isinstance(header, bytes):
            header = header.decode(errors="replace")
        scheme, _, key = str(header).partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise NotAuthenticated("authorization must be 'Bearer <api key>'")
        digest = _digest(key.strip())
        if any(hmac.compare_digest(candidate, digest) for candidate in self._admin):
            return None
        # a lookup by the digest of what was sent: its timing tells nothing of any stored digest's
        # preimage, so a dict serves as well as comparing against every digest in constant time
        secret = self._by_digest.get(digest)
        if secret is None:
            raise NotAuthenticated("invalid API key")
        return secret
