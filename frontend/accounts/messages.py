"""The store's tenancy values as the API's messages, and requests as the store's values. Checks of
the values themselves are the store's (`InvalidSetting`, `InvalidPrice`: INVALID_ARGUMENT)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import Message

from billing.budgets import MonthSpend
from billing.prices import Price
from contracts.scopes import SCOPES
from control.api_keys import KeySettings, KeyView
from control.errors import InvalidSetting
from control.tenants import TenantSettings, TenantView
from frontend.refusals import InvalidRequest
from lifecycle.usage_export import UsageRow
from llm.v1 import account_pb2, admin_pb2, usage_pb2

EXPORT_DAYS = 30  # an export without a window start covers this many days
DEFAULTS = TenantSettings()


def timestamp(at: datetime | None) -> timestamp_pb2.Timestamp | None:
    if at is None:
        return None
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(at)
    return message


def read_time(message: Message, field: str) -> datetime | None:
    """A Timestamp field as an aware datetime (None when unset); INVALID_SETTING out of range."""
    if not message.HasField(field):
        return None
    try:
        return getattr(message, field).ToDatetime(UTC)
    except (ValueError, OverflowError, OSError) as e:
        raise InvalidSetting(field, "not a valid time") from e


def read_window_time(message: Message, field: str) -> datetime | None:
    """As `read_time`, refused INVALID_WINDOW (as GetUsage's window is)."""
    try:
        return read_time(message, field)
    except InvalidSetting as e:
        raise InvalidRequest("INVALID_WINDOW", f"{field} is not a valid timestamp") from e


def duration(message: duration_pb2.Duration) -> timedelta:
    """A Duration as a timedelta (OverflowError past timedelta's range)."""
    return timedelta(seconds=message.seconds, microseconds=message.nanos // 1000)


def month_message(month: MonthSpend) -> account_pb2.MonthSpend:
    return account_pb2.MonthSpend(
        period_start=timestamp(month.period_start),
        reserved_micros=max(month.reserved_micros, 0),
        spent_micros=max(month.spent_micros, 0),
    )


def tenant_message(view: TenantView, month: MonthSpend) -> account_pb2.Tenant:
    s = view.settings
    settings = account_pb2.TenantSettings(
        weight=s.weight,
        max_concurrent_generations=s.max_concurrent_generations,
        input_tokens_per_minute=s.input_tokens_per_minute,
        output_tokens_per_minute=s.output_tokens_per_minute,
        max_queued_tokens=s.max_queued_tokens,
        monthly_budget_micros=s.monthly_budget_micros,
        allowed_models=list(s.allowed_models),
    )
    return account_pb2.Tenant(
        id=view.id,
        settings=settings,
        disabled=view.disabled,
        created_at=timestamp(view.created_at),
        updated_at=timestamp(view.updated_at),
        active_keys=view.active_keys,
        month=month_message(month),
    )


def key_message(view: KeyView, month: MonthSpend | None = None) -> account_pb2.ApiKey:
    s = view.settings
    settings = account_pb2.KeySettings(
        name=s.name,
        scopes=list(s.scopes),
        expires_at=timestamp(s.expires_at),
        input_tokens_per_minute=s.input_tokens_per_minute,
        output_tokens_per_minute=s.output_tokens_per_minute,
        monthly_budget_micros=s.monthly_budget_micros,
    )
    return account_pb2.ApiKey(
        id=view.id,
        tenant=view.tenant_id,
        settings=settings,
        created_at=timestamp(view.created_at),
        revoked_at=timestamp(view.revoked_at),
        last_used_at=timestamp(view.last_used_at),
        previous_expires_at=timestamp(view.previous_expires_at),
        month=month_message(month) if month is not None else None,
    )


def key_settings(
    message: account_pb2.KeySettings, expires_in: duration_pb2.Duration | None, *, now: datetime
) -> KeySettings:
    """A new key's settings: no scopes means both; `expires_in`, when set, overrides `expires_at`."""
    expires_at = read_time(message, "expires_at")
    if expires_in is not None and (expires_in.seconds or expires_in.nanos):
        try:
            expires_at = now + duration(expires_in)
        except OverflowError as e:
            raise InvalidSetting("expires_in", "out of range") from e
    return KeySettings(
        name=message.name,
        scopes=tuple(message.scopes) or SCOPES,
        expires_at=expires_at,
        input_tokens_per_minute=_optional(message, "input_tokens_per_minute"),
        output_tokens_per_minute=_optional(message, "output_tokens_per_minute"),
        monthly_budget_micros=_optional(message, "monthly_budget_micros"),
    )


def tenant_settings(message: account_pb2.TenantSettings) -> TenantSettings:
    """A new tenant's settings: zero quotas (and weight) take a config tenant's defaults."""
    return TenantSettings(
        weight=message.weight or DEFAULTS.weight,
        max_concurrent_generations=message.max_concurrent_generations or DEFAULTS.max_concurrent_generations,
        input_tokens_per_minute=message.input_tokens_per_minute or DEFAULTS.input_tokens_per_minute,
        output_tokens_per_minute=message.output_tokens_per_minute or DEFAULTS.output_tokens_per_minute,
        max_queued_tokens=message.max_queued_tokens or DEFAULTS.max_queued_tokens,
        monthly_budget_micros=_optional(message, "monthly_budget_micros"),
        allowed_models=tuple(message.allowed_models),
    )


def price_message(price: Price) -> admin_pb2.ModelPrice:
    r = price.rates
    return admin_pb2.ModelPrice(
        model_version=price.model_version_id,
        input_per_mtok=r.input_per_mtok,
        cached_input_per_mtok=r.cached_input_per_mtok,
        output_per_mtok=r.output_per_mtok,
        effective_at=timestamp(price.effective_at),
        set_at=timestamp(price.set_at),
        set_by=price.set_by,
    )


def usage_row_message(row: UsageRow) -> usage_pb2.UsageRow:
    return usage_pb2.UsageRow(
        tenant=row.tenant_id,
        api_key_id=row.api_key_id,
        model_version=row.model_version_id,
        adapter=row.adapter,
        period_start=timestamp(row.period_start),
        input_tokens=row.input_tokens,
        cached_input_tokens=row.cached_input_tokens,
        output_tokens=row.output_tokens,
        requests=row.requests,
        spend_micros=row.spent_micros,
    )


def usage_record(row: UsageRow) -> dict[str, Any]:
    """A row as the export's file formats take it (contracts/usage_format.py)."""
    return {
        "tenant": row.tenant_id,
        "api_key_id": row.api_key_id,
        "model_version": row.model_version_id,
        "adapter": row.adapter,
        "period_start": row.period_start.isoformat().replace("+00:00", "Z"),
        "input_tokens": row.input_tokens,
        "cached_input_tokens": row.cached_input_tokens,
        "output_tokens": row.output_tokens,
        "requests": row.requests,
        "spend_micros": row.spent_micros,
    }


def export_window(request: usage_pb2.ExportUsageRequest, *, now: datetime) -> tuple[datetime, datetime, str]:
    """(start, end, bucket) of an export: by default the last EXPORT_DAYS days, by day."""
    end = read_window_time(request, "window_end") or now
    try:
        start = read_window_time(request, "window_start") or end - timedelta(days=EXPORT_DAYS)
    except OverflowError as e:  # an end in the first days of year 1
        raise InvalidRequest("INVALID_WINDOW", "window_start is out of range") from e
    if end <= start:
        raise InvalidRequest("INVALID_WINDOW", "window_end must be after window_start")
    bucket = "hour" if request.bucket == usage_pb2.USAGE_BUCKET_HOUR else "day"
    return start, end, bucket


def _optional(message: Message, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None
