"""What one generation costs the shared store (issue 13: several frontends over one PostgreSQL),
counted with datastore/meter.py on SQLite and PostgreSQL alike. One transaction per step of its
life, and the statements each runs; the figures in docs/performance.md are these (plus the background work
shared by every generation: lease renewals, the sweeper, registry and catalog refreshes).

    admit            create (its INSERT says whether it was new), tenant row, version FOR SHARE,
                     reserve: load + rate window (conditional UPDATEs; their rows are created by
                     the tenant's first admission, and a window's by the first in that minute)
    start_attempt    QUEUED -> RUNNING under the row lock; the attempt's watermark opened
    usage            one aggregator batch: the cumulative report stored, the watermark advanced
    finish           fenced terminal update; the bill sealed (UPDATE ... RETURNING); the reservation
                     released by a conditional UPDATE ... RETURNING (its spend derived in it), and
                     refunded
    get_generation   GetGeneration: the row and its bill
A priced generation (billing/budgets.py) adds a conditional UPDATE per budget row at admission (the
tenant's and its key's month) and one UPDATE of both at its end; a free one touches none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from sqlalchemy import select

from billing.prices import Rates
from billing.usage import UsageReport, read_watermarks, record_usage
from control.models import ApiKey
from control.states import GenerationState
from datastore.meter import StoreCounts, StoreMeter
from datastore.store import Store
from lifecycle.accounts import set_price
from lifecycle.admission import admit
from lifecycle.attempts import renew_leases, start_attempt
from lifecycle.reads import get_generation
from lifecycle.termination import finish
from tests.builders import LEASE, T0, TENANT, VERSION_ID, at, new_generation, on, seed


def cost(meter: StoreMeter, step: Callable[[], Any]) -> StoreCounts:
    before = meter.counts()
    step()
    return meter.counts() - before


def usage_batch(store: Store, report: UsageReport) -> None:
    """What the usage aggregator writes for one batch (billing/aggregator.py)."""
    with store.transaction() as session:
        record_usage(session, [report], now=at(2))
        read_watermarks(session, [report.key])


def test_one_generation_costs_one_transaction_per_step(store: Store) -> None:
    seed(store)
    meter = StoreMeter.attach(store.engine)
    try:
        costs = {"first admit": cost(meter, lambda: admit(store, new_generation("cost-0"), now=T0))}
        new = new_generation("cost-1")
        costs["admit"] = cost(meter, lambda: admit(store, new, now=T0))
        before = meter.counts()
        lease = start_attempt(store, new.generation_id, on(), now=at(1))
        costs["start_attempt"] = meter.counts() - before
        report = UsageReport(new.generation_id, lease.epoch, 1, 50, 20, 0)
        costs["usage"] = cost(meter, lambda: usage_batch(store, report))
        costs["renew (per round)"] = cost(
            meter, lambda: renew_leases(store, [lease], now=at(3), lease_for=LEASE)
        )
        done = GenerationState.COMPLETED
        costs["finish"] = cost(
            meter, lambda: finish(store, lease, state=done, reason="OUTPUT_LIMIT", now=at(4))
        )
        costs["get_generation"] = cost(meter, lambda: get_generation(store, TENANT, new.generation_id))
    finally:
        meter.detach()
    # SQLite runs its BEGIN IMMEDIATE as a statement (datastore/store.py); PostgreSQL's BEGIN is a
    # round trip of its own (StoreCounts.round_trips), not a statement
    begins = 1 if store.dialect == "sqlite" else 0
    statements = {step: (c.statements - begins * c.transactions, c.transactions) for step, c in costs.items()}
    assert statements == {
        "first admit": (10, 1),  # the tenant's ledger row and this window's row are created
        "admit": (6, 1),  # with the version's status, read FOR SHARE (a retiring one pins nothing)
        "start_attempt": (4, 1),
        "usage": (4, 1),  # one batch: shared by every report the aggregator gathered meanwhile
        # every live generation of the frontend: its row and its attempt read locked, the lease extended
        "renew (per round)": (3, 1),
        "finish": (9, 1),
        "get_generation": (2, 1),
    }
    if store.dialect == "postgresql":  # + BEGIN and COMMIT, + the pool's liveness ping at checkout
        assert costs["admit"].round_trips == 6 + 2 + 1
        per_generation = sum(costs[s].round_trips for s in ("admit", "start_attempt", "usage", "finish"))
        assert per_generation == 35


def test_a_priced_generation_costs_its_budget_rows_and_nothing_more(store: Store) -> None:
    seed(store)
    set_price(store, VERSION_ID, Rates(1_000_000, 1_000_000, 1_000_000), effective_at=T0, actor="ann", now=T0)
    with store.transaction() as session:
        key_id = session.scalars(select(ApiKey.id).where(ApiKey.tenant_id == TENANT)).one()
    admit(store, replace(new_generation("warm"), api_key_id=key_id), now=T0)  # this month's rows exist
    meter = StoreMeter.attach(store.engine)
    try:
        new = replace(new_generation("priced"), api_key_id=key_id)
        admitted = cost(meter, lambda: admit(store, new, now=T0))
        lease = start_attempt(store, new.generation_id, on(), now=at(1))
        usage_batch(store, UsageReport(new.generation_id, lease.epoch, 1, 50, 20, 0))
        done = GenerationState.COMPLETED
        finished = cost(meter, lambda: finish(store, lease, state=done, reason="OUTPUT_LIMIT", now=at(4)))
    finally:
        meter.detach()
    begins = 1 if store.dialect == "sqlite" else 0
    assert (admitted.statements - begins, finished.statements - begins) == (6 + 2, 9 + 1)
