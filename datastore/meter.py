"""Counting what a process asks of the store: the per-request cost of the shared store, measured.

A `StoreMeter` listens to an engine's events and counts statements executed, transactions ended
(committed or rolled back) and connections checked out of the pool. On PostgreSQL each statement is
a round trip, and so are a transaction's BEGIN (psycopg sends it before the first statement) and
its COMMIT, and the liveness ping at each checkout (`pool_pre_ping`): `round_trips` adds them up.
On SQLite nothing travels; the counts still say how much work a request costs.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event


@dataclass(slots=True, frozen=True)
class StoreCounts:
    statements: int = 0
    transactions: int = 0  # commits and rollbacks
    checkouts: int = 0  # connections taken from the pool (each pinged on PostgreSQL)

    @property
    def round_trips(self) -> int:
        """Database round trips on PostgreSQL: statements, BEGIN and COMMIT, and the pings."""
        return self.statements + 2 * self.transactions + self.checkouts

    def __sub__(self, other: StoreCounts) -> StoreCounts:
        return StoreCounts(
            self.statements - other.statements,
            self.transactions - other.transactions,
            self.checkouts - other.checkouts,
        )


class StoreMeter:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._lock = threading.Lock()  # the store is used from many threads
        self._statements = 0
        self._transactions = 0
        self._checkouts = 0

    @classmethod
    def attach(cls, engine: Engine) -> StoreMeter:
        meter = cls(engine)
        event.listen(engine, "after_cursor_execute", meter._statement)
        event.listen(engine, "commit", meter._transaction)
        event.listen(engine, "rollback", meter._transaction)
        event.listen(engine.pool, "checkout", meter._checkout)
        return meter

    def detach(self) -> None:
        event.remove(self.engine, "after_cursor_execute", self._statement)
        event.remove(self.engine, "commit", self._transaction)
        event.remove(self.engine, "rollback", self._transaction)
        event.remove(self.engine.pool, "checkout", self._checkout)

    def counts(self) -> StoreCounts:
        with self._lock:
            return StoreCounts(self._statements, self._transactions, self._checkouts)

    def _statement(self, *_: Any) -> None:
        with self._lock:
            self._statements += 1

    def _transaction(self, *_: Any) -> None:
        with self._lock:
            self._transactions += 1

    def _checkout(self, *_: Any) -> None:
        with self._lock:
            self._checkouts += 1
