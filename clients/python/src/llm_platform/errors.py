"""Typed errors: every failed call raises an `ApiError` carrying the status code and the server's
google.rpc details (ErrorInfo reason, RetryInfo delay, QuotaFailure violations)."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


@dataclass(frozen=True)
class QuotaViolation:
    subject: str  # e.g. "tenant:acme"
    description: str


@dataclass
class ApiError(Exception):
    """A call the server refused or a stream that could not be resumed.

    `reason` is the ErrorInfo reason (UPPER_SNAKE, stable: QUOTA_EXCEEDED, REQUEST_ID_CONFLICT,
    CURSOR_EXPIRED, ...), empty when the status carried none (a transport failure). `retry_delay` is
    the server's RetryInfo in seconds, None when it gave none (do not retry blindly then).
    """

    code: grpc.StatusCode
    message: str
    reason: str = ""
    domain: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    retry_delay: float | None = None
    quota_violations: tuple[QuotaViolation, ...] = ()

    def __str__(self) -> str:
        reason = f" {self.reason}" if self.reason else ""
        return f"{self.code.name}{reason}: {self.message}"

    @property
    def is_transport_failure(self) -> bool:
        """UNAVAILABLE with no ErrorInfo: the connection broke, the server decided nothing."""
        return self.code == grpc.StatusCode.UNAVAILABLE and not self.reason

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> ApiError:
        """From a failed call: a sync `grpc.Call` or a `grpc.aio.AioRpcError` (both have a code,
        details and trailing metadata; a bare RpcError is UNKNOWN)."""
        if not hasattr(error, "code"):
            return cls(code=grpc.StatusCode.UNKNOWN, message=str(error))
        status = rpc_status.from_call(error)
        return cls.from_status(error.code(), error.details() or "", status)

    @classmethod
    def from_status(cls, code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> ApiError:
        """From a code and, when the server sent one, the google.rpc.Status with its details (also
        how a Converse `rejected` event's status reads)."""
        err = cls(code=code, message=message)
        for detail in status.details if status is not None else ():
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                err.reason, err.domain, err.metadata = info.reason, info.domain, dict(info.metadata)
            elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                detail.Unpack(retry)
                err.retry_delay = retry.retry_delay.ToTimedelta().total_seconds()
            elif detail.Is(error_details_pb2.QuotaFailure.DESCRIPTOR):
                quota = error_details_pb2.QuotaFailure()
                detail.Unpack(quota)
                err.quota_violations += tuple(
                    QuotaViolation(v.subject, v.description) for v in quota.violations
                )
        return err


def code_of(value: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a numeric google.rpc code."""
    return next((c for c in grpc.StatusCode if c.value[0] == value), grpc.StatusCode.UNKNOWN)
