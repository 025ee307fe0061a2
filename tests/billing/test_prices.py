"""Prices and the cost of usage: integer micro-USD, rounded up once per attempt, the same in Python
and in SQL."""

from __future__ import annotations

import pytest
from sqlalchemy import literal, select

from billing.budgets import month_end, month_start
from billing.prices import FREE, InvalidPrice, Rates, attempt_cost, list_prices, price_at, set_price
from billing.usage import UsageCounts
from control.model_versions import register_version
from datastore.store import Store
from tests.builders import T0, at, version_spec

# $0.15, $0.075 and $0.60 per million tokens
RATES = Rates(input_per_mtok=150_000, cached_input_per_mtok=75_000, output_per_mtok=600_000)


def test_costs_are_exact_integers_rounded_up_per_attempt() -> None:
    # 1,000 uncached prompt tokens at 0.15 µ$, 200 cached at 0.075 µ$, 300 output at 0.6 µ$:
    # 150 + 15 + 180 = 345 µ$ exactly
    assert RATES.cost(UsageCounts(input_tokens=1200, output_tokens=300, cached_input_tokens=200)) == 345
    assert RATES.cost(UsageCounts(input_tokens=1, output_tokens=0)) == 1  # 0.15 µ$ rounds up
    assert RATES.cost(UsageCounts()) == 0
    assert RATES.max_cost(1200, 300) == 360  # every prompt token at the dearer input price
    assert Rates(input_per_mtok=10, cached_input_per_mtok=20).max_cost(1000, 0) == 1  # 0.02 µ$, up
    assert FREE.free and not RATES.free and FREE.max_cost(10**6, 10**6) == 0
    with pytest.raises(InvalidPrice):
        Rates(input_per_mtok=-1)


def test_the_sql_cost_is_the_python_cost(store: Store) -> None:
    cases = [(1200, 200, 300), (1, 0, 0), (0, 0, 0), (7, 7, 1), (10**6, 5, 10**5)]
    with store.transaction() as session:
        for i, c, o in cases:
            rates = (literal(150_000), literal(75_000), literal(600_000))
            sql = session.scalar(select(attempt_cost(literal(i), literal(c), literal(o), rates)))
            assert sql == RATES.cost(UsageCounts(i, o, c))


def test_the_price_in_effect_is_the_latest_one_effective_by_then(store: Store) -> None:
    with store.transaction() as session:
        version = register_version(session, version_spec(), now=T0).id
        assert price_at(session, version, at(0)) == FREE
        set_price(session, version, RATES, effective_at=at(10), actor="ann", now=at(0))
        later = Rates(1, 2, 3)
        set_price(session, version, later, effective_at=at(100), actor="bob", now=at(1))
        assert [price_at(session, version, at(s)) for s in (5, 10, 99, 100, 1000)] == [
            FREE,
            RATES,
            RATES,
            later,
            later,
        ]
        recorded = list_prices(session, version)
    assert [(p.rates, p.effective_at, p.set_by) for p in recorded] == [
        (later, at(100), "bob"),
        (RATES, at(10), "ann"),
    ]


def test_a_budget_month_is_a_calendar_month_in_utc() -> None:
    assert month_start(T0) == T0.replace(day=1, hour=0)
    assert month_end(month_start(T0)) == T0.replace(month=2, day=1, hour=0)
    december = T0.replace(month=12, day=31, hour=23)
    assert month_end(month_start(december)) == T0.replace(year=2031, month=1, day=1, hour=0)
