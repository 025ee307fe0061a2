"""A request body's JSON: what a client may send, and a clear INVALID_ARGUMENT for the rest (issue
49: deep nesting, lone surrogates and cursors that `str.isdigit()` accepts reached a 500)."""

from __future__ import annotations

import pytest

from frontend.http.json_body import MAX_DEPTH, decode
from frontend.http.transcode import non_negative
from frontend.refusals import InvalidRequest


def malformed(raw: bytes, match: str) -> None:
    with pytest.raises(InvalidRequest, match=match) as e:
        decode(raw)
    assert e.value.reason == "MALFORMED_REQUEST"


def test_documents_a_client_sends_decode_as_json_does() -> None:
    assert decode(b'{"model":"m","prompt":"caf\xc3\xa9 \\u00e9 \\ud83d\\ude00"}') == {
        "model": "m",
        "prompt": "café é 😀",
    }
    assert decode(b'{"a":1,"a":2}') == {"a": 2}  # duplicate keys: the last one, as JSON.parse does
    assert decode(b"\xef\xbb\xbf[1]") == [1]  # a UTF-8 byte order mark is allowed
    assert decode(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None


def test_nesting_past_the_limit_is_malformed_however_deep() -> None:
    for depth in (MAX_DEPTH + 1, 5000, 200_000):  # past the limit; past the parser's own recursion
        malformed(b"[" * depth + b"]" * depth, "not valid JSON|nests deeper")
    malformed(b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH}")


def test_lone_surrogates_invalid_utf8_non_finite_and_oversized_numbers_are_malformed() -> None:
    malformed(b'{"prompt":"\\ud800"}', "not valid Unicode")
    malformed(b'{"\\udfff":1}', "not valid Unicode")  # in a key too
    malformed(b'{"messages":[{"content":"x\\ud83d"}]}', "not valid Unicode")
    malformed(b'{"prompt":"\xff\xfe"}', "not valid JSON")
    malformed(b'{"temperature":NaN}', "NaN is not a number")
    malformed(b'{"max_tokens":-Infinity}', "Infinity is not a number")
    malformed(b'{"max_tokens":' + b"9" * 5000 + b"}", "not valid JSON")  # past int's digit limit
    malformed(b'{"model":', "not valid JSON")


@pytest.mark.parametrize("cursor", ["²", "①", "١٢", "-1", "1e3", " 1", "0x10", "9" * 20])
def test_a_cursor_that_is_not_ascii_digits_is_malformed(cursor: str) -> None:
    with pytest.raises(InvalidRequest, match="non-negative integer"):
        non_negative(cursor, "after")


def test_a_cursor_of_ascii_digits_is_its_number() -> None:
    assert [non_negative(v, "after") for v in (None, "", "0", "17", "9" * 19)] == [0, 0, 0, 17, int("9" * 19)]
