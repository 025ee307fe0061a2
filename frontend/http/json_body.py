"""A request body as JSON, read within [frontend] max_request_bytes and [http] body_timeout_s, with
the limits of what a client may send: RFC 8259 JSON (no NaN or
Infinity), nested at most MAX_DEPTH deep, every string valid Unicode (no lone surrogates, which
`\\ud800` escapes would otherwise smuggle past the UTF-8 decoding into prompts and ids). Anything
else is the client's mistake: INVALID_ARGUMENT MALFORMED_REQUEST, never an error of the server's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request

from frontend.refusals import InvalidRequest

MAX_DEPTH = 64  # of arrays and objects; a constraint's JSON schema nests two a level: ample room


class TooLarge(Exception):
    """The request body is over [frontend] max_request_bytes."""


class TooSlow(Exception):
    """The request body did not arrive whole within [http] body_timeout_s."""


async def read(request: Request, max_bytes: int, timeout_s: float, empty: Any = None) -> Any:
    """The request's body, decoded (`empty`, when given, stands for no body at all); TooLarge or
    TooSlow when it is over its size or late."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdecimal() and int(declared) > max_bytes:  # not isdigit()
        raise TooLarge
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise TooLarge
                chunks.append(chunk)
    except TimeoutError:
        raise TooSlow from None
    if empty is not None and not b"".join(chunks).strip():
        return empty
    return decode(b"".join(chunks))


def _no_constant(name: str) -> Any:
    raise InvalidRequest("MALFORMED_REQUEST", f"the request body is not valid JSON ({name} is not a number)")


def decode(raw: bytes) -> Any:
    """The document `raw` holds; InvalidRequest when it is not one a client may send."""
    try:
        doc = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past the parser
        raise InvalidRequest("MALFORMED_REQUEST", "the request body is not valid JSON") from None
    check(doc)
    return doc


def check(doc: Any) -> None:
    """InvalidRequest when `doc` nests deeper than MAX_DEPTH or holds a string that is not valid
    Unicode; walked without recursion."""
    pending: list[tuple[Any, int]] = [(doc, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, str):
            _valid_text(value)
        elif isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidRequest(
                    "MALFORMED_REQUEST", f"the request body nests deeper than {MAX_DEPTH} levels"
                )
            if isinstance(value, dict):
                pending.extend((key, depth) for key in value)
                pending.extend((item, depth + 1) for item in value.values())
            else:
                pending.extend((item, depth + 1) for item in value)


def _valid_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(
            "MALFORMED_REQUEST",
            "the request body holds a string that is not valid Unicode (a lone surrogate)",
        ) from None
