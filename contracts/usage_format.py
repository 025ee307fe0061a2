"""The usage export's file formats, one encoding for the server's HTTP export and llmctl: CSV with
a header row, or JSON lines, of these columns. Money is exact: micro-USD as an integer, and USD as
a decimal string of six places."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any

COLUMNS = (
    "tenant",
    "api_key_id",
    "model_version",
    "adapter",
    "period_start",  # RFC 3339, UTC
    "input_tokens",  # billed prompt tokens, those from the prefix cache included
    "cached_input_tokens",
    "output_tokens",
    "requests",
    "spend_micros",
    "spend_usd",
)
FORMATS = ("csv", "jsonl")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}


def usd(micros: int) -> str:
    """Micro-USD as a decimal string: 1234567 -> "1.234567"."""
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), 1_000_000)
    return f"{sign}{whole}.{frac:06d}"


def record(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's columns in order (`spend_usd` derived from `spend_micros`)."""
    values = {c: row[c] for c in COLUMNS if c != "spend_usd"}
    return values | {"spend_usd": usd(int(row["spend_micros"]))}


def header(fmt: str) -> str:
    return ",".join(COLUMNS) + "\r\n" if fmt == "csv" else ""


def line(fmt: str, row: Mapping[str, Any]) -> str:
    values = record(row)
    if fmt == "jsonl":
        return json.dumps(values, separators=(",", ":")) + "\n"
    out = io.StringIO()
    csv.writer(out).writerow(values[c] for c in COLUMNS)
    return out.getvalue()
