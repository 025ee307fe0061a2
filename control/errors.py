"""Typed errors of the control store. Each maps to one gRPC status at the frontend boundary."""

from __future__ import annotations

from dataclasses import dataclass


class ControlError(Exception):
    """Base of every error the control store raises on purpose."""


@dataclass(slots=True)
class GenerationNotFound(ControlError):
    """NOT_FOUND: no such generation for this tenant (other tenants' generations are not revealed)."""

    generation_id: str

    def __str__(self) -> str:
        return f"generation {self.generation_id} not found"


@dataclass(slots=True)
class RequestIdConflict(ControlError):
    """ALREADY_EXISTS, reason REQUEST_ID_CONFLICT: the request id names a different effective payload."""

    tenant_id: str
    request_id: str
    generation_id: str  # the existing generation holding this request id

    def __str__(self) -> str:
        return f"request id {self.request_id!r} is already used by a different request"


@dataclass(slots=True)
class IllegalTransition(ControlError):
    """FAILED_PRECONDITION: the transition table has no edge from `current` to `requested`."""

    generation_id: str
    current: str
    requested: str

    def __str__(self) -> str:
        return f"generation {self.generation_id}: {self.current} -> {self.requested} is not allowed"


@dataclass(slots=True)
class CancelRequested(ControlError):
    """FAILED_PRECONDITION: a canceled generation gets no new attempt."""

    generation_id: str

    def __str__(self) -> str:
        return f"generation {self.generation_id} has a cancel request; no new attempt"


@dataclass(slots=True)
class LeaseHeld(ControlError):
    """UNAVAILABLE: the current attempt still holds an unexpired lease; it cannot be replaced yet."""

    generation_id: str
    epoch: int

    def __str__(self) -> str:
        return f"generation {self.generation_id}: epoch {self.epoch} still holds its lease"


class FencingError(ControlError):
    """A write by an attempt that no longer owns its generation; the write was rejected."""


@dataclass(slots=True)
class StaleEpoch(FencingError):
    generation_id: str
    epoch: int  # the epoch the writer holds
    current_epoch: int | None  # the generation's epoch now; None if it never had an attempt

    def __str__(self) -> str:
        return f"generation {self.generation_id}: epoch {self.epoch} is stale (current {self.current_epoch})"


@dataclass(slots=True)
class LeaseExpired(FencingError):
    generation_id: str
    epoch: int

    def __str__(self) -> str:
        return f"generation {self.generation_id}: the lease of epoch {self.epoch} has expired"


@dataclass(slots=True)
class AttemptEnded(FencingError):
    generation_id: str
    epoch: int

    def __str__(self) -> str:
        return f"generation {self.generation_id}: attempt {self.epoch} has already ended"


@dataclass(slots=True)
class UnknownModelVersion(ControlError):
    """INVALID_ARGUMENT: no such model version or alias (or the route has no servable version)."""

    model: str

    def __str__(self) -> str:
        return f"unknown model {self.model!r}"


@dataclass(slots=True)
class ModelVersionConflict(ControlError):
    """ALREADY_EXISTS: a version id is immutable; re-registering it with other content is refused."""

    version_id: str

    def __str__(self) -> str:
        return f"model version {self.version_id} already exists with different content"


@dataclass(slots=True)
class ApiKeyConflict(ControlError):
    """An API key is already held by another tenant."""

    tenant_id: str

    def __str__(self) -> str:
        return f"an API key of tenant {self.tenant_id} belongs to another tenant"


@dataclass(slots=True)
class InvalidAlias(ControlError):
    """INVALID_ARGUMENT: an alias must be non-empty, at most 128 characters, and without '@'."""

    alias: str

    def __str__(self) -> str:
        return f"alias {self.alias!r} must be non-empty, at most 128 characters, and without '@'"


@dataclass(slots=True)
class InvalidRoute(ControlError):
    """INVALID_ARGUMENT: a route needs at least one target, every weight positive."""

    alias: str

    def __str__(self) -> str:
        return f"the route of {self.alias!r} needs at least one target, every weight positive"


@dataclass(slots=True)
class VersionRouted(ControlError):
    """FAILED_PRECONDITION: a version an alias routes to cannot be retired."""

    version_id: str
    aliases: tuple[str, ...]

    def __str__(self) -> str:
        return f"model version {self.version_id} is routed by {', '.join(self.aliases)}; re-route first"


@dataclass(slots=True)
class VersionNotServable(ControlError):
    """FAILED_PRECONDITION: a retiring or retired version takes no new route and no new pin."""

    version_id: str
    status: str

    def __str__(self) -> str:
        return f"model version {self.version_id} is {self.status}"


@dataclass(slots=True)
class NoPreviousRoute(ControlError):
    """FAILED_PRECONDITION: the alias has no recorded route to roll back to."""

    alias: str

    def __str__(self) -> str:
        return f"alias {self.alias!r} has no previous route to roll back to"


@dataclass(slots=True)
class CanaryAmbiguous(ControlError):
    """INVALID_ARGUMENT: promote names no version and the route has no single canary leg."""

    alias: str

    def __str__(self) -> str:
        return f"the route of {self.alias!r} has no single canary: name the version to promote"


@dataclass(slots=True)
class InvalidSetting(ControlError, ValueError):
    """INVALID_ARGUMENT: a tenant's, key's or price's setting out of range (`field` names it)."""

    field: str
    detail: str

    def __str__(self) -> str:
        return f"{self.field}: {self.detail}"


@dataclass(slots=True)
class TenantNotFound(ControlError):
    """NOT_FOUND: no tenant with this id."""

    tenant_id: str

    def __str__(self) -> str:
        return f"no tenant {self.tenant_id!r}"


@dataclass(slots=True)
class TenantExists(ControlError):
    """ALREADY_EXISTS: a tenant with this id exists (update it instead)."""

    tenant_id: str

    def __str__(self) -> str:
        return f"tenant {self.tenant_id!r} already exists"


@dataclass(slots=True)
class TenantDisabled(ControlError):
    """PERMISSION_DENIED: the tenant is disabled; it starts no new generation."""

    tenant_id: str

    def __str__(self) -> str:
        return f"tenant {self.tenant_id!r} is disabled"


@dataclass(slots=True)
class ApiKeyNotFound(ControlError):
    """NOT_FOUND: no such key (for a tenant's own calls: none of its keys)."""

    key_id: str

    def __str__(self) -> str:
        return f"no API key {self.key_id!r}"


@dataclass(slots=True)
class ApiKeyRevoked(ControlError):
    """FAILED_PRECONDITION: a revoked key is never rotated or changed (create a new one)."""

    key_id: str

    def __str__(self) -> str:
        return f"API key {self.key_id!r} is revoked"


@dataclass(slots=True)
class ApiKeyNotValid(ControlError):
    """UNAUTHENTICATED: the key that admits a generation was revoked or has expired (admission reads
    it in its own transaction, so a revocation stops new generations at once on every frontend)."""

    key_id: str

    def __str__(self) -> str:
        return f"API key {self.key_id} is revoked or expired"
