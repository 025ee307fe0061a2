"""The one table from domain errors to API errors (status, ErrorInfo reason, RetryInfo), for gRPC
(frontend/rpc/interceptors.py applies it to every RPC: servicers raise, they never abort) and HTTP
(frontend/http/errors.py renders the same ApiError).

Anything not in the table is a bug: the client gets INTERNAL with a generic message (never the
exception's text) and the log gets the traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from artifacts.manifest import ArtifactIntegrityError
from billing.errors import InvalidUsageReport, QuotaExceeded, UsageNotDurable
from control.errors import (
    ApiKeyConflict,
    AttemptEnded,
    CanaryAmbiguous,
    CancelRequested,
    GenerationNotFound,
    IllegalTransition,
    InvalidAlias,
    InvalidRoute,
    LeaseExpired,
    LeaseHeld,
    ModelVersionConflict,
    NoPreviousRoute,
    RequestIdConflict,
    StaleEpoch,
    UnknownModelVersion,
    VersionNotServable,
    VersionRouted,
)
from frontend.admin.push import PushConflict, PushRefused, PushTooLarge
from frontend.catalog.tokenization import TemplateError
from frontend.errors import ApiError, cursor_expired, invalid_argument, store_unavailable
from frontend.generations.stream_log import CursorExpired

log = logging.getLogger(__name__)
Code = grpc.StatusCode
RETRY_SOON_S = 1.0  # a load quota frees as the tenant's generations finish


def _quota(e: QuotaExceeded) -> ApiError:
    if e.retry_after is not None:
        retry: float | None = e.retry_after.total_seconds()
    else:  # a load quota frees as generations finish; a request over the whole limit never fits
        retry = RETRY_SOON_S if e.requested <= e.limit else None
    return ApiError(
        Code.RESOURCE_EXHAUSTED,
        "QUOTA_EXCEEDED",
        f"tenant quota {e.kind} exhausted ({e.in_use} in use of {e.limit}, {e.requested} requested)",
        {"quota": str(e.kind)},
        retry_after_s=retry,
        quota=(
            f"tenant:{e.tenant_id}",
            f"{e.kind}: limit {e.limit}, in use {e.in_use}, requested {e.requested}",
        ),
    )


def _store_unavailable(e: Exception) -> ApiError:
    log.warning("control store unavailable: %s", type(e).__name__)
    return store_unavailable()


def _fenced(e: Exception) -> ApiError:
    return ApiError(Code.ABORTED, "ATTEMPT_FENCED", str(e))


TABLE: dict[type[Exception], Callable[[Any], ApiError]] = {
    # control
    GenerationNotFound: lambda e: ApiError(
        Code.NOT_FOUND, "GENERATION_NOT_FOUND", f"no generation {e.generation_id[:128]!r}"
    ),
    RequestIdConflict: lambda e: ApiError(
        Code.ALREADY_EXISTS,
        "REQUEST_ID_CONFLICT",
        f"request_id {e.request_id[:128]!r} was used with a different request",
        {"generation_id": e.generation_id},
    ),
    IllegalTransition: lambda e: ApiError(Code.FAILED_PRECONDITION, "ILLEGAL_TRANSITION", str(e)),
    CancelRequested: lambda e: ApiError(Code.FAILED_PRECONDITION, "CANCEL_REQUESTED", str(e)),
    LeaseHeld: lambda e: ApiError(Code.UNAVAILABLE, "LEASE_HELD", str(e), retry_after_s=RETRY_SOON_S),
    StaleEpoch: _fenced,
    LeaseExpired: _fenced,
    AttemptEnded: _fenced,
    UnknownModelVersion: lambda e: invalid_argument(
        "UNKNOWN_MODEL", f"unknown model {e.model[:128]!r}", model=e.model[:128]
    ),
    ModelVersionConflict: lambda e: ApiError(Code.ALREADY_EXISTS, "MODEL_VERSION_CONFLICT", str(e)),
    ApiKeyConflict: lambda e: ApiError(Code.ALREADY_EXISTS, "API_KEY_CONFLICT", str(e)),
    InvalidAlias: lambda e: invalid_argument("INVALID_ALIAS", str(e)),
    InvalidRoute: lambda e: invalid_argument("INVALID_ROUTE", str(e)),
    VersionRouted: lambda e: ApiError(
        Code.FAILED_PRECONDITION, "VERSION_ROUTED", str(e), {"aliases": ",".join(e.aliases)[:500]}
    ),
    VersionNotServable: lambda e: ApiError(Code.FAILED_PRECONDITION, "VERSION_NOT_SERVABLE", str(e)),
    NoPreviousRoute: lambda e: ApiError(Code.FAILED_PRECONDITION, "NO_PREVIOUS_ROUTE", str(e)),
    CanaryAmbiguous: lambda e: invalid_argument("VERSION_REQUIRED", str(e)),
    # billing
    QuotaExceeded: _quota,
    InvalidUsageReport: lambda e: ApiError(Code.INTERNAL, "INVALID_USAGE_REPORT", "internal error"),
    UsageNotDurable: lambda e: ApiError(
        Code.UNAVAILABLE, "USAGE_NOT_DURABLE", "usage could not be recorded", retry_after_s=RETRY_SOON_S
    ),
    # the store (also what every use case raises while it is down or locked past its timeout)
    OperationalError: _store_unavailable,
    InterfaceError: _store_unavailable,
    PoolTimeout: _store_unavailable,
    # frontend and engine
    TemplateError: lambda e: invalid_argument("TEMPLATE_ERROR", str(e)[:500]),
    CursorExpired: lambda e: cursor_expired(e.generation_id),
    # pushes (frontend/admin/push.py): a refused one left nothing in the repository
    PushRefused: lambda e: invalid_argument(e.reason, str(e)[:500]),
    PushTooLarge: lambda e: ApiError(Code.RESOURCE_EXHAUSTED, e.reason, str(e)[:500]),
    PushConflict: lambda e: ApiError(Code.ALREADY_EXISTS, e.reason, str(e)[:500]),
    ArtifactIntegrityError: lambda e: ApiError(
        Code.FAILED_PRECONDITION, "ARTIFACT_INVALID", f"the artifact failed verification: {str(e)[:500]}"
    ),
}


def api_error(e: Exception) -> ApiError:
    """The API error of any exception: itself, its table row (the nearest class up its MRO), or a
    generic INTERNAL (logged with its traceback, never shown to the client)."""
    if isinstance(e, ApiError):
        return e
    for cls in type(e).__mro__:
        rule = TABLE.get(cls)
        if rule is not None:
            return rule(e)
    log.error("unexpected error", exc_info=e)
    return ApiError(Code.INTERNAL, "INTERNAL", "internal error")
