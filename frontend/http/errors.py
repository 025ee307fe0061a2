"""API errors over HTTP: the conventional status of each gRPC code (google.rpc.Code's own HTTP
mapping), `Retry-After` where the status carries a RetryInfo, and a JSON body with the same
ErrorInfo reason as on gRPC. The error itself comes from the one table (frontend/api_errors.py).

REST API (Google's JSON error shape, the google.rpc.Status details in protobuf's JSON mapping):

    {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "reason": "QUOTA_EXCEEDED",
               "message": "...", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", ...}]}}

OpenAI endpoints (the shape the openai clients parse; `code` is the reason):

    {"error": {"message": "...", "type": "rate_limit_error", "param": null, "code": "QUOTA_EXCEEDED"}}
"""

from __future__ import annotations

import json
import math
from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2
from starlette.responses import Response

from frontend.api_errors import ApiError

Code = grpc.StatusCode
HTTP_STATUS = {
    Code.OK: 200,
    Code.CANCELLED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.UNAUTHENTICATED: 401,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.FAILED_PRECONDITION: 400,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
}
OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


def http_status(error: ApiError) -> int:
    return HTTP_STATUS.get(error.code, 500)


class HttpError:
    """One error as an HTTP answer: status, headers and the body of either API."""

    def __init__(self, error: ApiError, status: int | None = None) -> None:
        """status: overrides the code's status (413 for a body over the size limit)."""
        self.error = error
        self.proto = error.to_proto()  # RetryInfo jittered once: the header and the body agree
        self.status = status or http_status(error)

    @property
    def retry_after_s(self) -> float | None:
        for detail in self.proto.details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                return info.retry_delay.ToMilliseconds() / 1000
        return None

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        retry = self.retry_after_s
        if retry is not None:
            headers["retry-after"] = str(max(1, math.ceil(retry)))
            headers["retry-after-ms"] = str(int(retry * 1000))
        elif self.status in (429, 503):
            headers["x-should-retry"] = "false"  # a request over a whole limit never fits
        if self.status == 401:
            headers["www-authenticate"] = 'Bearer realm="llm"'
        return headers

    def rest_body(self) -> dict[str, Any]:
        """Google's JSON error object of the google.rpc.Status."""
        return {
            "error": {
                "code": self.status,
                "status": self.error.code.name,
                "reason": self.error.reason,
                "message": self.proto.message,
                "details": json_format.MessageToDict(self.proto).get("details", []),
            }
        }

    def openai_body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.proto.message,
                "type": OPENAI_TYPES.get(self.status, "server_error"),
                "param": self.error.metadata.get("field"),
                "code": self.error.reason,
            }
        }


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dumps(content)


def rest_error(error: ApiError, status: int | None = None) -> Response:
    """The REST API's error answer."""
    e = HttpError(error, status)
    return JSON(e.rest_body(), e.status, e.headers())


def openai_error(error: ApiError, status: int | None = None) -> Response:
    """The OpenAI endpoints' error answer."""
    e = HttpError(error, status)
    return JSON(e.openai_body(), e.status, e.headers())
