"""What llmctl's tenancy verbs read from the command line: durations, money and times."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation

from google.protobuf import duration_pb2, timestamp_pb2

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def seconds(text: str) -> int:
    """ "90s", "15m", "12h", "30d", "2w", or a plain number of seconds."""
    match = re.fullmatch(r"(\d+)([smhdw]?)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration such as 90s, 15m, 12h, 30d or 2w")
    return int(match.group(1)) * _UNITS[match.group(2) or "s"]


def duration(text: str) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds(text))


def micros(text: str) -> int:
    """USD (at most six decimals) as integer micro-USD: "0.15" -> 150000."""
    try:
        value = Decimal(text) * 1_000_000
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"{text!r}: an amount in USD, such as 12.50") from None
    if value < 0 or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"{text!r}: a non-negative amount with at most six decimals")
    return int(value)


def budget(text: str) -> int | None:
    """A monthly budget in USD, or "none" (no budget)."""
    return None if text.strip().lower() == "none" else micros(text)


def when(text: str) -> timestamp_pb2.Timestamp:
    """A date (2026-12-01, midnight UTC) or an RFC 3339 time (2026-12-01T12:00:00Z)."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            at = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
        else:
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
            at = at if at.tzinfo else at.replace(tzinfo=UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a date (2026-12-01) or RFC 3339 time") from None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(at)
    return stamp


def usd(micros_: int) -> str:
    whole, frac = divmod(micros_, 1_000_000)
    return f"${whole}.{frac:06d}".rstrip("0").rstrip(".") if frac else f"${whole}"
