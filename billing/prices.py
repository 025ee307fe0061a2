"""Prices per model version, and the cost of usage at a price.

Money is integer micro-USD (USD millionths); a price is micro-USD per million tokens for prompt
tokens, prompt tokens served from the prefix cache, and output tokens. A price row takes effect at
its `effective_at` and holds until a later one's; a generation is billed at the price in effect
when it was admitted (pinned on its reservation), so a price change never re-prices what is running.

The cost of an attempt is its sealed watermark at its generation's pinned price, rounded up to the
micro-USD, once per attempt (`attempt_cost`, one SQL expression): the ledger's spend at release,
GetUsage and the usage export all sum that same expression, so spend is derived from sealed usage
once and the same everywhere. A version with no price is free.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, ColumnElement, Select, SQLColumnExpression, cast, select
from sqlalchemy.orm import Session

from billing.models import ModelPrice
from billing.usage import UsageCounts

PER_MTOK = 1_000_000  # a price is per million tokens
MICROS_PER_USD = 1_000_000
MAX_PRICE = 10**12  # micro-USD per million tokens ($1M): keeps every product inside 64 bits


class InvalidPrice(ValueError):
    """A price out of range (the Admin call that sets it is INVALID_ARGUMENT)."""


@dataclass(slots=True, frozen=True)
class Rates:
    """A price: micro-USD per million tokens of each kind."""

    input_per_mtok: int = 0
    cached_input_per_mtok: int = 0
    output_per_mtok: int = 0

    def __post_init__(self) -> None:
        for rate in (self.input_per_mtok, self.cached_input_per_mtok, self.output_per_mtok):
            if not 0 <= rate <= MAX_PRICE:
                raise InvalidPrice(
                    f"a price is between 0 and {MAX_PRICE // MICROS_PER_USD} USD per million tokens"
                )

    @property
    def free(self) -> bool:
        return not (self.input_per_mtok or self.cached_input_per_mtok or self.output_per_mtok)

    def max_cost(self, input_tokens: int, output_tokens: int) -> int:
        """The most a request of this many prompt and output tokens can cost (every prompt token at
        the dearer of the two input prices), in micro-USD, rounded up."""
        dearest = max(self.input_per_mtok, self.cached_input_per_mtok)
        return _ceil_div(input_tokens * dearest + output_tokens * self.output_per_mtok, PER_MTOK)

    def cost(self, usage: UsageCounts) -> int:
        """What one attempt's usage costs, in micro-USD (as `attempt_cost` computes it in SQL)."""
        uncached = usage.input_tokens - usage.cached_input_tokens
        total = (
            uncached * self.input_per_mtok
            + usage.cached_input_tokens * self.cached_input_per_mtok
            + usage.output_tokens * self.output_per_mtok
        )
        return _ceil_div(total, PER_MTOK)


FREE = Rates()


@dataclass(slots=True, frozen=True)
class Price:
    """One recorded price of a version."""

    model_version_id: str
    rates: Rates
    effective_at: datetime
    set_at: datetime
    set_by: str


def set_price(
    session: Session,
    model_version_id: str,
    rates: Rates,
    *,
    effective_at: datetime,
    actor: str,
    now: datetime,
) -> Price:
    """Records a price of the version from `effective_at` on (the caller checks the version exists)."""
    row = ModelPrice(
        model_version_id=model_version_id,
        input_per_mtok=rates.input_per_mtok,
        cached_input_per_mtok=rates.cached_input_per_mtok,
        output_per_mtok=rates.output_per_mtok,
        effective_at=effective_at,
        set_at=now,
        set_by=actor[:200],
    )
    session.add(row)
    session.flush()
    return _price(row)


def price_at(session: Session, model_version_id: str, at: datetime) -> Rates:
    """The version's price in effect at `at` (FREE when none is)."""
    row = session.scalars(current_price(model_version_id, at)).first()
    return FREE if row is None else _price(row).rates


def current_price(
    model_version_id: str | ColumnElement[str], at: datetime | ColumnElement[datetime]
) -> Select[ModelPrice]:
    """SELECT the price row in effect for the version at `at` (none: no row)."""
    return (
        select(ModelPrice)
        .where(ModelPrice.model_version_id == model_version_id, ModelPrice.effective_at <= at)
        .order_by(ModelPrice.effective_at.desc(), ModelPrice.id.desc())
        .limit(1)
    )


def list_prices(session: Session, model_version_id: str = "") -> list[Price]:
    """Every recorded price (of one version when given), newest effective first."""
    query = select(ModelPrice).order_by(ModelPrice.effective_at.desc(), ModelPrice.id.desc())
    if model_version_id:
        query = query.where(ModelPrice.model_version_id == model_version_id)
    return [_price(row) for row in session.scalars(query)]


def attempt_cost(
    input_tokens: SQLColumnExpression[int],
    cached_input_tokens: SQLColumnExpression[int],
    output_tokens: SQLColumnExpression[int],
    rates: tuple[SQLColumnExpression[int], SQLColumnExpression[int], SQLColumnExpression[int]],
) -> ColumnElement[int]:
    """The SQL of `Rates.cost`: one attempt's watermark at (input, cached input, output) rates."""
    input_rate, cached_rate, output_rate = rates
    total = (
        big(input_tokens - cached_input_tokens) * input_rate
        + big(cached_input_tokens) * cached_rate
        + big(output_tokens) * output_rate
    )
    return (total + (PER_MTOK - 1)) // PER_MTOK


def big(tokens: SQLColumnExpression[int]) -> ColumnElement[int]:
    """A token count as a 64-bit integer: times a rate, it passes 2**31."""
    return cast(tokens, BigInteger)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _price(row: ModelPrice) -> Price:
    rates = Rates(row.input_per_mtok, row.cached_input_per_mtok, row.output_per_mtok)
    return Price(row.model_version_id, rates, row.effective_at, row.set_at, row.set_by)
