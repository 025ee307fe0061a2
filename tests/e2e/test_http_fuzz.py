"""Fuzzing of the HTTP surface over the real frontend (issue 49), as tests/e2e/test_fuzz.py fuzzes
gRPC: every route the OpenAPI document lists (REST, OpenAI, account, admin) gets random and hostile
JSON (deep nesting, huge documents, every JSON type where an object is due, invalid UTF-8, lone
surrogates, huge and non-finite numbers, duplicate keys), hostile headers (resume cursors that
`str.isdigit()` accepts but `int()` does not, request ids, content types and encodings, keys) and
hostile path segments. No answer may be a 500, nothing may be logged at ERROR (a client's mistake is
not the server's), and health stays SERVING."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.conftest import KEY_ADMIN, KEY_FUZZ

CALL_TIMEOUT_S = 60.0  # generous: a hang fails, a slow machine does not
FIELDS = [
    "model", "prompt", "messages", "input", "stream", "requestId", "request_id", "maxOutputTokens",
    "max_output_tokens", "max_tokens", "max_completion_tokens", "sampling", "temperature", "top_p",
    "top_k", "seed", "stop", "n", "logprobs", "top_logprobs", "tier", "constraint", "response_format",
    "role", "content", "name", "tools", "stream_options", "include_usage", "user", "echo", "suffix",
    "presence_penalty", "frequency_penalty", "logit_bias", "tenantId", "keyId", "windowStart", "windowEnd",
]  # fmt: skip
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.one_of(
    st.sampled_from(
        ["", "smollm2-135m", "user", "assistant", "system", "json_object", "BATCH", "2026-01-01"]
    ),
    st.text(max_size=24),
    st.text(st.one_of(SURROGATES, st.characters()), min_size=1, max_size=8),
)
NUMBERS = st.one_of(
    st.integers(-5, 40),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),  # NaN and Infinity: Python's JSON reads them
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(FIELDS) | TEXT, inner, max_size=5)
    ),
    max_leaves=12,
)


def raw_documents() -> st.SearchStrategy[bytes]:
    """Bodies no JSON encoder writes: deep nesting, invalid UTF-8, escaped lone surrogates, huge
    numbers, duplicate keys, truncation."""
    depth = st.sampled_from([50, 500, 5000, 100_000])
    return st.one_of(
        depth.map(lambda n: b"[" * n + b"]" * n),
        depth.map(lambda n: b'{"model":' * n + b"1" + b"}" * n),
        depth.map(lambda n: b'{"messages":[' + b'{"content":' * n + b'"x"' + b"}" * n + b"]}"),
        st.sampled_from(
            [
                b'{"model":"smollm2-135m","prompt":"\xff\xfe"}',
                b'{"model":"smollm2-135m","prompt":"\\ud800"}',
                b'{"model":"smollm2-135m","messages":[{"role":"user","content":"\\udfff\\ud800"}]}',
                b'{"model":"\\ud83d","messages":[{"role":"\\ud800","content":"hi"}]}',
                b'{"model":"smollm2-135m","max_tokens":' + b"9" * 5000 + b"}",
                b'{"model":"smollm2-135m","max_tokens":1e999999,"prompt":"x"}',
                b'{"model":"smollm2-135m","temperature":-Infinity,"prompt":"x"}',
                b'{"model":"smollm2-135m","model":"other","prompt":"x","prompt":7}',
                b'{"model":"smollm2-135m","prompt":"x"',
                b"\xef\xbb\xbf{}",
                b"",
            ]
        ),
        st.binary(max_size=64),
    )


def body() -> st.SearchStrategy[bytes]:
    documents = VALUES.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    objects = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=6).map(
        lambda v: json.dumps({"model": "smollm2-135m", **v}).encode()
    )
    return st.one_of(objects, objects, documents, raw_documents())


# cursors: `str.isdigit()` is true for "²" and "①", which int() refuses
CURSORS = st.one_of(
    st.sampled_from(["²", "①", "١٢", "-1", "1e3", " 1", "0x10", "9" * 30, "18446744073709551616", "", "3"]),
    st.text(max_size=6),
)
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40)
CONTENT_TYPES = st.sampled_from(
    ["application/json", "text/plain", "application/json; charset=utf-16", "multipart/form-data", "", "*/*"]
)


def header_bytes(value: str) -> bytes:
    """The value's UTF-8 bytes as a header may carry them (no control characters, nothing to trim)."""
    return bytes(b for b in value.encode("utf-8", "surrogatepass") if b > 0x20 and b != 0x7F)


def headers() -> st.SearchStrategy[dict[bytes, bytes]]:
    key = st.sampled_from(
        [f"Bearer {KEY_FUZZ}"] * 4 + [f"Bearer {KEY_ADMIN}", "Bearer", "Basic Zm9v", "Bearer \xff"]
    )
    optional = st.fixed_dictionaries(
        {},
        optional={
            "last-event-id": CURSORS,
            "idempotency-key": HEADER_TEXT,
            "x-request-id": HEADER_TEXT,
            "content-encoding": st.sampled_from(["gzip", "br", "deflate", "identity", "x-garbage"]),
            "accept-encoding": st.sampled_from(["gzip", "*", "identity;q=0"]),
            "accept": st.sampled_from(["text/event-stream", "application/json", "*/*", "x/y"]),
            "traceparent": st.sampled_from(["00-" + "0" * 32 + "-" + "0" * 16 + "-01", "garbage"]),
        },
    )
    return st.builds(
        lambda auth, ctype, rest: {
            b"authorization": auth.encode("latin-1"),
            **({b"content-type": ctype.encode()} if ctype else {}),
            **{k.encode(): header_bytes(v) for k, v in rest.items()},
        },
        key,
        CONTENT_TYPES,
        optional,
    )


SEGMENTS = st.one_of(
    st.sampled_from(["gen-1", "%ED%A0%80", "%FF", "..", "%2e%2e", "%2F", "x" * 5000, "%00", "%", "a:b", "~"]),
    st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E).filter(lambda c: c not in "/?#"), max_size=20
    ),
)
QUERIES = st.dictionaries(
    st.sampled_from(["after", "requestId", "request_id", "windowStart", "windowEnd", "pageToken", "limit"]),
    st.one_of(CURSORS, st.sampled_from(["%ED%A0%80", "%FF", "2026-13-45T99:00:00Z"])),
    max_size=3,
)


def route_list(client: httpx.Client) -> list[tuple[str, str]]:
    """(method, path template) of every route the OpenAPI document lists, and the keyless ones."""
    paths = client.get("/openapi.json").json()["paths"]
    listed = [
        (m.upper(), p)
        for p, ops in paths.items()
        for m in ops
        if m in ("get", "post", "put", "delete", "patch")
    ]
    return sorted({*listed, ("GET", "/healthz"), ("GET", "/openapi.json"), ("GET", "/no/such/route")})


def fill(template: str, segment: str) -> str:
    return re.sub(r"\{[^}]+\}", lambda _: segment, template)


class ErrorLog(logging.Handler):
    """Every record at ERROR or above, anywhere in this process (the frontend runs in it)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def errors_logged() -> Iterator[ErrorLog]:
    handler = ErrorLog()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def send(client: httpx.Client, method: str, url: str, hdrs: dict[bytes, bytes], content: bytes) -> int:
    """The answer's status; a stream is left right after its headers (its run is cancelled)."""
    with client.stream(method, url, headers=hdrs, content=content if method != "GET" else None) as response:
        return response.status_code


def fuzz(base_url: str, examples: int) -> list[tuple[str, str, int]]:
    seen: list[tuple[str, str, int]] = []
    with httpx.Client(base_url=base_url, timeout=CALL_TIMEOUT_S) as client:
        routes = route_list(client)

        @settings(
            max_examples=examples, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
        )
        @given(st.data())
        def one(data: st.DataObject) -> None:
            method, template = data.draw(st.sampled_from(routes))
            path = fill(template, data.draw(SEGMENTS))
            query = data.draw(QUERIES)
            pairs = "&".join(f"{k}={quote(v, safe='%')}" for k, v in query.items())  # "%FF" stays raw
            url = path + ("?" + pairs if query else "")
            status = send(client, method, url, data.draw(headers()), data.draw(body()))
            seen.append((method, template, status))
            assert status != 500, f"{method} {url} answered 500"

        one()
        assert client.get("/healthz").status_code == 200
    return seen


async def test_no_http_request_gets_a_500_or_logs_an_error(http_url: str) -> None:
    with errors_logged() as logged:
        seen = await asyncio.to_thread(fuzz, http_url, 400)
    assert [r.getMessage() for r in logged.records] == []
    templates = {t for _, t, _ in seen}
    assert {"/v1/generations", "/v1/chat/completions", "/v1/completions"} <= templates
    statuses = {s for _, _, s in seen}
    assert {400, 401, 404} <= statuses
