"""Typed errors of billing; each maps to one gRPC status at the frontend boundary."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta


class BillingError(Exception):
    """Base of every error billing raises on purpose."""


class QuotaKind(enum.StrEnum):
    CONCURRENT_GENERATIONS = "CONCURRENT_GENERATIONS"  # tenant.max_concurrent_generations
    QUEUED_TOKENS = "QUEUED_TOKENS"  # tenant.max_queued_tokens (reserved tokens of live generations)
    INPUT_TOKENS_PER_MINUTE = "INPUT_TOKENS_PER_MINUTE"
    OUTPUT_TOKENS_PER_MINUTE = "OUTPUT_TOKENS_PER_MINUTE"
    KEY_INPUT_TOKENS_PER_MINUTE = "KEY_INPUT_TOKENS_PER_MINUTE"  # an API key's own limits
    KEY_OUTPUT_TOKENS_PER_MINUTE = "KEY_OUTPUT_TOKENS_PER_MINUTE"


@dataclass(slots=True)
class QuotaExceeded(BillingError):
    """RESOURCE_EXHAUSTED with a QuotaFailure (and RetryInfo when `retry_after` is set)."""

    tenant_id: str
    kind: QuotaKind
    limit: int  # tokens or generations, per window for the rate quotas
    in_use: int
    requested: int
    # When the rate window resets. None for the load quotas (they free as generations finish) and
    # when `requested > limit`, which no wait can satisfy.
    retry_after: timedelta | None

    def __str__(self) -> str:
        used = f"in use {self.in_use}, requested {self.requested}"
        return f"tenant {self.tenant_id}: {self.kind} quota of {self.limit} exceeded ({used})"


@dataclass(slots=True)
class BudgetExceeded(BillingError):
    """RESOURCE_EXHAUSTED, reason BUDGET_EXCEEDED: the request's maximum cost does not fit in what is
    left of the tenant's (or its key's) monthly budget. No RetryInfo: it frees only as admitted
    generations end under their maximum, or when the month turns (`period_end`)."""

    subject: str  # "tenant:<id>" or "key:<id>"
    budget_micros: int  # micro-USD for the month
    spent_micros: int  # spend of the month's generations that ended
    reserved_micros: int  # maximum cost of its live generations
    requested_micros: int  # this request's maximum cost
    period_end: datetime

    def __str__(self) -> str:
        used = (
            f"spent {self.spent_micros}, reserved {self.reserved_micros}, requested {self.requested_micros}"
        )
        return f"{self.subject}: monthly budget of {self.budget_micros} micro-USD exceeded ({used})"


@dataclass(slots=True)
class InvalidUsageReport(BillingError, ValueError):
    """A usage report with impossible counts (negative, cached > input, sequence < 1)."""

    detail: str

    def __str__(self) -> str:
        return f"invalid usage report: {self.detail}"


@dataclass(slots=True)
class UsageNotDurable(BillingError):
    """The aggregator could not make a batch durable; the frontend must not claim a final bill."""

    generation_id: str
    epoch: int

    def __str__(self) -> str:
        return f"usage of {self.generation_id}/{self.epoch} is not durable yet"
