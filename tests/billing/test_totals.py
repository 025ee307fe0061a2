from __future__ import annotations

from billing.totals import GenerationUsage, generation_usage
from billing.usage import UsageCounts, UsageReport, record_usage
from control.states import GenerationState
from datastore.store import Store
from lifecycle.attempts import start_attempt
from lifecycle.termination import finish
from tests.builders import at, on, running, seed

S = GenerationState


def report(store: Store, generation_id: str, epoch: int, seq: int, i: int, o: int, c: int = 0) -> None:
    with store.transaction() as session:
        record_usage(session, [UsageReport(generation_id, epoch, seq, i, o, c)], now=at(0))


def test_generation_usage_sums_attempts_and_is_final_once_all_are_sealed(store: Store) -> None:
    seed(store)
    first = running(store)
    g = first.generation_id
    report(store, g, 1, 1, 50, 0)
    second = start_attempt(store, g, on("w2"), now=at(31))
    report(store, g, 2, 1, 50, 8)
    with store.transaction() as session:
        assert generation_usage(session, g) == GenerationUsage(g, UsageCounts(100, 8), final=False)
    finish(store, second, state=S.COMPLETED, reason="COMPLETED", now=at(40))
    with store.transaction() as session:
        assert generation_usage(session, g) == GenerationUsage(g, UsageCounts(100, 8), final=True)
        assert generation_usage(session, "nope") == GenerationUsage("nope", UsageCounts(), final=False)
