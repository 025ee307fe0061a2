"""The one table from domain errors to API errors (status, ErrorInfo reason, RetryInfo), for gRPC
(frontend/rpc/interceptors.py applies it to every RPC: servicers raise, they never abort) and HTTP
(frontend/http/errors.py renders the same ApiError).

Anything not in the table is a bug: the client gets INTERNAL with a generic message (never the
exception's text) and the log gets the traceback.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from artifacts.manifest import ArtifactIntegrityError
from billing.errors import BudgetExceeded, InvalidUsageReport, QuotaExceeded, UsageNotDurable
from billing.prices import InvalidPrice
from control.errors import (
    ApiKeyConflict,
    ApiKeyNotFound,
    ApiKeyNotValid,
    ApiKeyRevoked,
    AttemptEnded,
    CanaryAmbiguous,
    CancelRequested,
    GenerationNotFound,
    IllegalTransition,
    InvalidAlias,
    InvalidRoute,
    InvalidSetting,
    LeaseExpired,
    LeaseHeld,
    ModelVersionConflict,
    NoPreviousRoute,
    RequestIdConflict,
    StaleEpoch,
    TenantDisabled,
    TenantExists,
    TenantNotFound,
    UnknownModelVersion,
    VersionNotServable,
    VersionRouted,
)
from frontend.admin.push import PushConflict, PushRefused, PushTooLarge
from frontend.catalog.tokenization import TemplateError
from frontend.generations.stream_log import CursorExpired
from frontend.refusals import (
    Exhausted,
    InternalFailure,
    InvalidRequest,
    NotAuthenticated,
    NotFound,
    NotPermitted,
    OutOfRange,
    PreconditionFailed,
    Refusal,
    StoreUnavailable,
    Unavailable,
    Unsupported,
)

DOMAIN = "llm.v1"
# an error never echoes unbounded client input: messages and detail values are cut to these
MAX_MESSAGE_CHARS = 1024
MAX_DETAIL_CHARS = 256


@dataclass(slots=True)
class ApiError(Exception):
    code: grpc.StatusCode
    reason: str  # UPPER_SNAKE ErrorInfo reason, stable for clients
    message: str  # human-readable; never contains prompt or output text
    metadata: dict[str, str] = field(default_factory=dict)
    retry_after_s: float | None = None  # base delay; the status carries it jittered
    quota: tuple[str, str] | None = None  # (subject, description) of a QuotaFailure violation

    def __str__(self) -> str:
        return f"{self.code.name} {self.reason}: {self.message}"

    def to_status(self, rng: random.Random | None = None) -> grpc.Status:
        return rpc_status.to_status(self.to_proto(rng))

    def to_proto(self, rng: random.Random | None = None) -> status_pb2.Status:
        """The google.rpc.Status (also carried in a Converse `rejected` event)."""
        details = []
        metadata = {k[:64]: v[:MAX_DETAIL_CHARS] for k, v in self.metadata.items()}
        info = error_details_pb2.ErrorInfo(reason=self.reason, domain=DOMAIN, metadata=metadata)
        details.append(info)
        if self.retry_after_s is not None:
            jittered = self.retry_after_s * (1.0 + (rng or random).random() * 0.5)
            delay = duration_pb2.Duration()
            delay.FromMilliseconds(int(jittered * 1000))
            details.append(error_details_pb2.RetryInfo(retry_delay=delay))
        if self.quota is not None:
            subject, description = self.quota
            violation = error_details_pb2.QuotaFailure.Violation(subject=subject, description=description)
            details.append(error_details_pb2.QuotaFailure(violations=[violation]))
        status = status_pb2.Status(code=self.code.value[0], message=self.message[:MAX_MESSAGE_CHARS])
        for d in details:
            status.details.add().Pack(d)
        return status


def relayed(status: status_pb2.Status) -> ApiError | None:
    """The ApiError a google.rpc.Status of this API carries (a forwarded call's refusal, passed on
    unchanged); None for a status without our ErrorInfo (a transport failure)."""
    info = error_info(status)
    if info is None or info.domain != DOMAIN:
        return None
    error = ApiError(_CODES[status.code], info.reason, status.message, dict(info.metadata))
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            error.retry_after_s = retry.retry_delay.ToMilliseconds() / 1000
        elif detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
            quota = error_details_pb2.QuotaFailure()
            detail.Unpack(quota)
            if quota.violations:
                error.quota = (quota.violations[0].subject, quota.violations[0].description)
    return error


_CODES = {code.value[0]: code for code in grpc.StatusCode}


def error_info(status: status_pb2.Status) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo detail of a status, for clients and tests."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


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


def _budget(e: BudgetExceeded) -> ApiError:
    """No RetryInfo: the budget frees as the month's live generations end under their maximum, or
    when the month turns (`period_end` in the metadata), not after a short wait."""
    spent = f"spent {e.spent_micros}, reserved {e.reserved_micros}, requested {e.requested_micros} micro-USD"
    return ApiError(
        Code.RESOURCE_EXHAUSTED,
        "BUDGET_EXCEEDED",
        f"monthly budget of {e.subject} exhausted (budget {e.budget_micros}, {spent})",
        {"subject": e.subject, "budget_micros": str(e.budget_micros), "period_end": e.period_end.isoformat()},
        quota=(e.subject, f"MONTHLY_BUDGET: budget {e.budget_micros}, {spent}"),
    )


def _store_unavailable(e: Exception) -> ApiError:
    log.warning("control store unavailable: %s", type(e).__name__)
    return _refused(Code.UNAVAILABLE)(StoreUnavailable())


def _refused(code: grpc.StatusCode) -> Callable[[Refusal], ApiError]:
    """A refusal of the frontend's own, as it reads: its reason, message, metadata and retry delay."""
    return lambda e: ApiError(code, e.reason, e.message, dict(e.metadata), retry_after_s=e.retry_after_s)


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
    UnknownModelVersion: lambda e: ApiError(
        Code.INVALID_ARGUMENT, "UNKNOWN_MODEL", f"unknown model {e.model[:128]!r}", {"model": e.model[:128]}
    ),
    ModelVersionConflict: lambda e: ApiError(Code.ALREADY_EXISTS, "MODEL_VERSION_CONFLICT", str(e)),
    ApiKeyConflict: lambda e: ApiError(Code.ALREADY_EXISTS, "API_KEY_CONFLICT", str(e)),
    InvalidAlias: lambda e: ApiError(Code.INVALID_ARGUMENT, "INVALID_ALIAS", str(e)),
    InvalidRoute: lambda e: ApiError(Code.INVALID_ARGUMENT, "INVALID_ROUTE", str(e)),
    VersionRouted: lambda e: ApiError(
        Code.FAILED_PRECONDITION, "VERSION_ROUTED", str(e), {"aliases": ",".join(e.aliases)[:500]}
    ),
    VersionNotServable: lambda e: ApiError(Code.FAILED_PRECONDITION, "VERSION_NOT_SERVABLE", str(e)),
    NoPreviousRoute: lambda e: ApiError(Code.FAILED_PRECONDITION, "NO_PREVIOUS_ROUTE", str(e)),
    CanaryAmbiguous: lambda e: ApiError(Code.INVALID_ARGUMENT, "VERSION_REQUIRED", str(e)),
    # tenants and keys (control/tenants.py, control/api_keys.py)
    InvalidSetting: lambda e: ApiError(
        Code.INVALID_ARGUMENT, "INVALID_SETTING", str(e)[:500], {"field": e.field}
    ),
    TenantNotFound: lambda e: ApiError(Code.NOT_FOUND, "TENANT_NOT_FOUND", str(e)[:200]),
    TenantExists: lambda e: ApiError(Code.ALREADY_EXISTS, "TENANT_EXISTS", str(e)[:200]),
    TenantDisabled: lambda e: ApiError(Code.PERMISSION_DENIED, "TENANT_DISABLED", "the tenant is disabled"),
    ApiKeyNotFound: lambda e: ApiError(Code.NOT_FOUND, "API_KEY_NOT_FOUND", str(e)[:200]),
    ApiKeyRevoked: lambda e: ApiError(Code.FAILED_PRECONDITION, "API_KEY_REVOKED", str(e)[:200]),
    ApiKeyNotValid: lambda e: ApiError(
        Code.UNAUTHENTICATED, "UNAUTHENTICATED", "the API key was revoked or has expired"
    ),
    # billing
    QuotaExceeded: _quota,
    BudgetExceeded: _budget,
    InvalidPrice: lambda e: ApiError(Code.INVALID_ARGUMENT, "INVALID_PRICE", str(e)[:200]),
    InvalidUsageReport: lambda e: ApiError(Code.INTERNAL, "INVALID_USAGE_REPORT", "internal error"),
    UsageNotDurable: lambda e: ApiError(
        Code.UNAVAILABLE, "USAGE_NOT_DURABLE", "usage could not be recorded", retry_after_s=RETRY_SOON_S
    ),
    # the store (also what every use case raises while it is down or locked past its timeout)
    OperationalError: _store_unavailable,
    InterfaceError: _store_unavailable,
    PoolTimeout: _store_unavailable,
    # the frontend's own refusals (frontend/refusals.py), by meaning
    InvalidRequest: _refused(Code.INVALID_ARGUMENT),
    NotAuthenticated: _refused(Code.UNAUTHENTICATED),
    NotPermitted: _refused(Code.PERMISSION_DENIED),
    NotFound: _refused(Code.NOT_FOUND),
    OutOfRange: _refused(Code.OUT_OF_RANGE),
    Unavailable: _refused(Code.UNAVAILABLE),
    Exhausted: _refused(Code.RESOURCE_EXHAUSTED),
    PreconditionFailed: _refused(Code.FAILED_PRECONDITION),
    Unsupported: _refused(Code.UNIMPLEMENTED),
    InternalFailure: _refused(Code.INTERNAL),
    # the frontend's other domain errors
    TemplateError: lambda e: ApiError(Code.INVALID_ARGUMENT, "TEMPLATE_ERROR", str(e)[:500]),
    CursorExpired: lambda e: ApiError(
        Code.OUT_OF_RANGE, "CURSOR_EXPIRED", "the events after this cursor are no longer retained"
    ),
    # pushes (frontend/admin/push.py): a refused one left nothing in the repository
    PushRefused: lambda e: ApiError(Code.INVALID_ARGUMENT, e.reason, str(e)[:500]),
    PushTooLarge: lambda e: ApiError(Code.RESOURCE_EXHAUSTED, e.reason, str(e)[:500]),
    PushConflict: lambda e: ApiError(Code.ALREADY_EXISTS, e.reason, str(e)[:500]),
    ArtifactIntegrityError: lambda e: ApiError(
        Code.FAILED_PRECONDITION, "ARTIFACT_INVALID", f"the artifact failed verification: {str(e)[:500]}"
    ),
}


def api_error(e: BaseException) -> ApiError:
    """The API error of any exception: itself (an ApiError relayed from another frontend), its
    table row (the nearest class up its MRO), or a generic INTERNAL (logged with its traceback,
    never shown to the client)."""
    if isinstance(e, ApiError):
        return e
    for cls in type(e).__mro__:
        rule = TABLE.get(cls)
        if rule is not None:
            return rule(e)
    log.error("unexpected error", exc_info=e)
    return ApiError(Code.INTERNAL, "INTERNAL", "internal error")
