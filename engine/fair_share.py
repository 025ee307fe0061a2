"""Weighted fair share of prefill work across cache salts (a tenant, or a trust group): start-time
fair queuing over what each salt's chunks cost.

    served(salt)     prefill cost served to the salt so far / its weight (its virtual finish time)
    join(salt, ...)  a salt that becomes backlogged starts at the virtual time: the start of the
                     chunk in service (the least service among backlogged salts, less its last
                     charge), or where its own service left it if that is later. No credit for idle
                     time, at most one chunk ahead.
    charge(salt, c)  a chunk of cost c (prompt-token equivalents, its attention included) / weight

No torch, no clock: the scheduler (engine/scheduler.py) orders prefill candidates by finish tags
built on `served` (engine/prefill_order.py).
"""

from __future__ import annotations

from collections.abc import Iterable


class FairShare:
    def __init__(self) -> None:
        self._served: dict[str, float] = {}  # cache salt -> prefill cost served / weight
        self._last_charge: dict[str, float] = {}  # cache salt -> its latest chunk's cost / weight

    def served(self, salt: str) -> float:
        return self._served.get(salt, 0.0)

    def join(self, salt: str, backlogged: Iterable[str]) -> None:
        """`salt` has prefill work again; `backlogged`: the salts that already have some."""
        least = min(backlogged, key=self.served, default=None)
        if least is None:
            self._served.setdefault(salt, 0.0)
            return
        start = self.served(least) - self._last_charge.get(least, 0.0)
        self._served[salt] = max(self._served.get(salt, start), start)

    def charge(self, salt: str, cost: float, weight: float) -> None:
        self._last_charge[salt] = cost / weight
        self._served[salt] = self.served(salt) + self._last_charge[salt]
