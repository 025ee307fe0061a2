"""Usage reports and durable watermarks per (generation_id, epoch).

A report carries cumulative counts, so recording is idempotent by construction:
- a report's identity is (generation_id, epoch, sequence); a repeated identity is ignored, even if
  its counts differ;
- a watermark takes the max of the new reports, never their sum, so an older report arriving late
  changes nothing;
- once sealed, the billable counts are frozen; new reports raise only the observed counts.
One call writes a whole batch in three statements, whatever its size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Integer,
    Row,
    String,
    Table,
    Update,
    bindparam,
    case,
    insert,
    select,
    tuple_,
    update,
)
from sqlalchemy.orm import Session

from billing.errors import InvalidUsageReport
from billing.models import UsageEvent, Watermark
from datastore.base import UTCDateTime
from datastore.upsert import built_once, insert_for

AttemptKey = tuple[str, int]  # (generation_id, epoch)
_COUNT_COLUMNS = ("input_tokens", "output_tokens", "cached_input_tokens")


@dataclass(slots=True, frozen=True)
class UsageCounts:
    """Cumulative token counts of one attempt (or sums of them)."""

    input_tokens: int = 0  # processed prompt tokens
    output_tokens: int = 0  # generated output tokens
    cached_input_tokens: int = 0  # prompt tokens served from the prefix cache

    def peak(self, other: UsageCounts) -> UsageCounts:
        """The component-wise max: how cumulative counts combine (never a sum)."""
        return UsageCounts(
            max(self.input_tokens, other.input_tokens),
            max(self.output_tokens, other.output_tokens),
            max(self.cached_input_tokens, other.cached_input_tokens),
        )

    def minus(self, other: UsageCounts) -> UsageCounts:
        """The part of self above `other`, never negative."""
        return UsageCounts(
            max(self.input_tokens - other.input_tokens, 0),
            max(self.output_tokens - other.output_tokens, 0),
            max(self.cached_input_tokens - other.cached_input_tokens, 0),
        )


@dataclass(slots=True, frozen=True)
class UsageReport:
    """One cumulative report from an attempt: everything processed since the attempt started."""

    generation_id: str
    epoch: int
    sequence: int  # per (generation, epoch), from 1; with the two above, the report's identity
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0

    def __post_init__(self) -> None:
        if self.epoch < 1 or self.sequence < 1:
            raise InvalidUsageReport("epoch and sequence start at 1")
        if min(self.input_tokens, self.output_tokens, self.cached_input_tokens) < 0:
            raise InvalidUsageReport("counts must be non-negative")
        if self.cached_input_tokens > self.input_tokens:
            raise InvalidUsageReport("cached input exceeds input")

    @property
    def key(self) -> AttemptKey:
        return (self.generation_id, self.epoch)

    @property
    def identity(self) -> tuple[str, int, int]:
        return (self.generation_id, self.epoch, self.sequence)

    @property
    def counts(self) -> UsageCounts:
        return UsageCounts(self.input_tokens, self.output_tokens, self.cached_input_tokens)


@dataclass(slots=True, frozen=True)
class WatermarkView:
    generation_id: str
    epoch: int
    billable: UsageCounts  # the durable watermark; the final bill once sealed
    observed: UsageCounts  # max of every report, including those after the seal
    sealed: bool

    @property
    def unbilled(self) -> UsageCounts:
        """Work reported but not billed: the crash tail seen only after the seal."""
        return self.observed.minus(self.billable)


@dataclass(slots=True, frozen=True)
class RecordOutcome:
    recorded: int  # reports stored (new identities)
    duplicates: int  # identities already stored or repeated within the batch
    unknown: int  # no such attempt: dropped
    after_seal: int  # new reports for attempts sealed before the batch: observed only, never billed


def open_watermark(session: Session, generation_id: str, epoch: int, *, now: datetime) -> None:
    """The zero watermark of a new attempt (the lifecycle opens it when the attempt starts), by one
    statement built once (every generation's attempt runs it)."""
    session.connection().execute(_OPEN, {"generation": generation_id, "attempt": epoch, "at": now})


def record_usage(session: Session, reports: Sequence[UsageReport], *, now: datetime) -> RecordOutcome:
    """Stores a batch of reports and advances their watermarks, idempotently."""
    first: dict[tuple[str, int, int], UsageReport] = {}
    for report in reports:
        first.setdefault(report.identity, report)
    repeated = len(reports) - len(first)
    keys = sorted({r.key for r in first.values()})
    if not keys:
        return RecordOutcome(0, repeated, 0, 0)
    connection = session.connection()
    sealed = {(g, e): at is not None for g, e, at in connection.execute(_SEALED, {"keys": keys})}
    known = sorted((r for r in first.values() if r.key in sealed), key=lambda r: r.identity)
    inserted = _insert_events(session, known, now) if known else set()
    new = [r for r in known if r.identity in inserted]
    peaks: dict[AttemptKey, UsageCounts] = {}
    for r in new:
        peaks[r.key] = peaks.get(r.key, UsageCounts()).peak(r.counts)
    if peaks:  # in key order, so concurrent writers lock rows in one order
        session.connection().execute(
            _ADVANCE,
            [
                {
                    "g": g,
                    "e": e,
                    "i": p.input_tokens,
                    "o": p.output_tokens,
                    "c": p.cached_input_tokens,
                    "at": now,
                }
                for (g, e), p in sorted(peaks.items())
            ],
        )
    return RecordOutcome(
        recorded=len(new),
        duplicates=repeated + len(known) - len(new),
        unknown=len(first) - len(known),
        after_seal=sum(1 for r in new if sealed[r.key]),
    )


def read_watermarks(session: Session, keys: Iterable[AttemptKey]) -> dict[AttemptKey, WatermarkView]:
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    rows = session.connection().execute(_READ, {"keys": wanted})
    return {(w.generation_id, w.epoch): view(w) for w in rows}


def read_watermark(session: Session, generation_id: str, epoch: int) -> WatermarkView | None:
    return read_watermarks(session, [(generation_id, epoch)]).get((generation_id, epoch))


def view(w: Row[Any]) -> WatermarkView:
    """A watermark from a row of all its columns."""
    return WatermarkView(
        generation_id=w.generation_id,
        epoch=w.epoch,
        billable=UsageCounts(w.input_tokens, w.output_tokens, w.cached_input_tokens),
        observed=UsageCounts(
            w.observed_input_tokens, w.observed_output_tokens, w.observed_cached_input_tokens
        ),
        sealed=w.sealed_at is not None,
    )


def _insert_events(session: Session, reports: list[UsageReport], now: datetime) -> set[tuple[str, int, int]]:
    """Inserts the reports' events; returns the identities that were new."""
    rows = session.connection().execute(
        built_once(session, _INSERT_EVENTS, _build_insert_events),
        [
            {
                "generation_id": r.generation_id,
                "epoch": r.epoch,
                "sequence": r.sequence,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "cached_input_tokens": r.cached_input_tokens,
                "recorded_at": now,
            }
            for r in reports
        ],
    )
    return {(g, e, s) for g, e, s in rows}


def _build_insert_events(session: Session) -> Any:
    events = UsageEvent.__table__
    return (
        insert_for(session, events)
        .on_conflict_do_nothing(index_elements=["generation_id", "epoch", "sequence"])
        .returning(events.c.generation_id, events.c.epoch, events.c.sequence)
    )


def _build_advance() -> Update:
    """UPDATE one watermark to the max of itself and (:i, :o, :c); billable columns only if unsealed."""
    table = Watermark.__table__
    open_ = table.c.sealed_at.is_(None)
    values: dict[str, ColumnElement[int]] = {}
    for column, param in zip(_COUNT_COLUMNS, ("i", "o", "c"), strict=True):
        new = bindparam(param, type_=Integer)
        billable, observed = table.c[column], table.c[f"observed_{column}"]
        values[column] = case((open_ & (new > billable), new), else_=billable)
        values[f"observed_{column}"] = case((new > observed, new), else_=observed)
    return (
        update(Watermark)
        .where(table.c.generation_id == bindparam("g"), table.c.epoch == bindparam("e"))
        .values(updated_at=bindparam("at", type_=UTCDateTime()), **values)
    )


_ADVANCE = _build_advance()
_WATERMARKS = cast(Table, Watermark.__table__)
# Built once: every usage batch runs them (the key list binds as one expanding parameter)
_KEYS_IN = tuple_(_WATERMARKS.c.generation_id, _WATERMARKS.c.epoch).in_(bindparam("keys", expanding=True))
_SEALED = select(_WATERMARKS.c.generation_id, _WATERMARKS.c.epoch, _WATERMARKS.c.sealed_at).where(_KEYS_IN)
_READ = select(_WATERMARKS).where(_KEYS_IN)
_INSERT_EVENTS: dict[str, Any] = {}  # per dialect: the events' INSERT ... ON CONFLICT DO NOTHING RETURNING
# every count starts at 0 (parameter names never equal a column's: they would be taken as its value)
_OPEN = insert(_WATERMARKS).values(
    {column: 0 for column in (*_COUNT_COLUMNS, *(f"observed_{c}" for c in _COUNT_COLUMNS))}
    | {
        "generation_id": bindparam("generation", type_=String()),
        "epoch": bindparam("attempt"),
        "sealed_at": None,
        "updated_at": bindparam("at", type_=UTCDateTime()),
    }
)
