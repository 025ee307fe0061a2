"""Fixed rate windows: the tokens a tenant, or one of its keys with limits of its own, was admitted
per window (one minute), charged by one conditional UPDATE, so concurrent admissions never pass a
limit together. A generation's unused reservation is refunded to the window it was charged to
(billing/ledger.py `release_reservation`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from billing import ledger_sql as sql
from billing.errors import QuotaExceeded, QuotaKind
from billing.models import KeyRateWindow, RateWindow
from datastore.upsert import insert_for

RATE_WINDOW = timedelta(minutes=1)
UNLIMITED = 2**31 - 1  # a key's limit it does not have
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True, frozen=True)
class RateUsage:
    window_start: datetime
    input_tokens: int  # charged in [window_start, window_start + window)
    output_tokens: int


@dataclass(slots=True, frozen=True)
class Counter:
    """Whose window: a tenant's, or (with `key_id`) one of its keys'."""

    tenant_id: str
    key_id: str | None = None


def window_start(now: datetime, window: timedelta = RATE_WINDOW) -> datetime:
    """The start of the fixed window holding `now` (windows are aligned to the Unix epoch)."""
    return _EPOCH + ((now - _EPOCH) // window) * window


def rate_usage(
    session: Session,
    tenant_id: str,
    *,
    now: datetime,
    window: timedelta = RATE_WINDOW,
    key_id: str | None = None,
) -> RateUsage:
    """The tokens charged in the window holding `now` to the tenant (or to its key `key_id`)."""
    start = window_start(now, window)
    row: RateWindow | KeyRateWindow | None
    if key_id is None:
        row = session.get(RateWindow, (tenant_id, start), populate_existing=True)
    else:
        row = session.get(KeyRateWindow, (key_id, start), populate_existing=True)
    return RateUsage(start, row.input_tokens if row else 0, row.output_tokens if row else 0)


def charge_window(
    session: Session,
    counter: Counter,
    tokens: tuple[int, int],
    per_minute: tuple[int | None, int | None],
    start: datetime,
    now: datetime,
    window: timedelta,
) -> None:
    """Charges (prompt, output) `tokens` to the counter's window within its (input, output)
    `per_minute` limits scaled to the window (None: no limit), or raises `QuotaExceeded`."""
    scale = window / timedelta(minutes=1)
    limit_in, limit_out = (UNLIMITED if p is None else int(p * scale) for p in per_minute)
    want_in, want_out = tokens
    params: dict[str, Any] = {
        "start": start,
        "want_in": want_in,
        "want_out": want_out,
        "limit_in": limit_in,
        "limit_out": limit_out,
    }
    key_id = counter.key_id
    if key_id is None:
        params["tenant"] = counter.tenant_id
        statement = sql.CHARGE_RATE
        create = insert_for(session, RateWindow).values(tenant_id=counter.tenant_id)
        conflict = ["tenant_id", "window_start"]
    else:
        params["key"] = key_id
        statement = sql.CHARGE_KEY_RATE
        create = insert_for(session, KeyRateWindow).values(api_key_id=key_id)
        conflict = ["api_key_id", "window_start"]
    create = create.values(window_start=start, input_tokens=0, output_tokens=0)
    if sql.charge_row(
        session, statement, params, lambda: create.on_conflict_do_nothing(index_elements=conflict)
    ):
        return
    used = rate_usage(session, counter.tenant_id, now=now, window=window, key_id=key_id)
    if used.input_tokens + want_in > limit_in:
        kind, limit, in_use, wanted = QuotaKind.INPUT_TOKENS_PER_MINUTE, limit_in, used.input_tokens, want_in
    else:
        kind, limit, in_use, wanted = (
            QuotaKind.OUTPUT_TOKENS_PER_MINUTE,
            limit_out,
            used.output_tokens,
            want_out,
        )
    who = counter.tenant_id
    if key_id is not None:
        kind = QuotaKind(f"KEY_{kind}")
        who = f"{counter.tenant_id} (key {key_id})"
    retry_after = start + window - now if wanted <= limit else None
    raise QuotaExceeded(who, kind, limit, in_use, wanted, retry_after)
