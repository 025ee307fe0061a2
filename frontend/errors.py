"""Typed API errors and their mapping to gRPC statuses with google.rpc details.

Code anywhere in the frontend raises an `ApiError`; the servicer boundary turns it into a status
with an ErrorInfo (reason + metadata) and, where a retry may succeed, a jittered RetryInfo.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

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


def invalid_argument(reason: str, message: str, **metadata: str) -> ApiError:
    return ApiError(grpc.StatusCode.INVALID_ARGUMENT, reason, message, dict(metadata))


def unauthenticated(message: str) -> ApiError:
    return ApiError(grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", message)


def unavailable(reason: str, message: str, retry_after_s: float = 1.0) -> ApiError:
    return ApiError(grpc.StatusCode.UNAVAILABLE, reason, message, retry_after_s=retry_after_s)


def draining() -> ApiError:
    """This frontend is shutting down: new work (a generation, a stream relayed from its owner)
    goes to another frontend."""
    return unavailable("DRAINING", "this frontend is shutting down; send the request to another")


def store_unavailable() -> ApiError:
    """The control store cannot be reached (or is locked past its timeout): retry soon."""
    return unavailable("STORE_UNAVAILABLE", "the control store is unavailable")


def cursor_expired(generation_id: str) -> ApiError:
    return ApiError(
        grpc.StatusCode.OUT_OF_RANGE,
        "CURSOR_EXPIRED",
        f"the events of generation {generation_id} after this cursor are no longer retained",
        {"generation_id": generation_id},
    )


def error_info(status: status_pb2.Status) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo detail of a status, for clients and tests."""
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None
