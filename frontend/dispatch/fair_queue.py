"""Admission arithmetic, without I/O: a request's price, the wait it would see, and fair order.

    Ticket        a request's price: prefill tokens and KV blocks, its tenant, weight and tier
    WaitPredictor predicted queue wait before a ticket's prefill starts, from the prefill backlog
                  (queued + dispatched, not yet started) and the measured prefill rate
    FairQueue     tickets waiting for worker memory, in weighted fair order across tenants within a
                  tier, interactive before batch (start-time fair queuing by token cost)

The predictor assumes the workers' schedulers share prefill fairly (engine/scheduler.py): ahead of
a ticket are all more urgent tiers' backlog, its own tenant's backlog, and from every other tenant
of its tier at most that tenant's fair share of the ticket's own cost (cost * w_other / w_self).
The rate is prefill tokens completed per second during which there was prefill backlog, so it
already reflects the decode load the workers carry. Time comes in as arguments (`now`, seconds).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from contracts.tier import Tier
from frontend.dispatch.prefix_routing import PromptPrefix


@dataclass(slots=True, frozen=True)
class Ticket:
    generation_id: str
    tenant_id: str
    weight: float  # the tenant's fair-share weight
    tier: Tier
    prompt_tokens: int  # prefill cost (tokens), before any prefix-cache hit
    blocks: int  # KV blocks the worker reserves: contracts.capacity.blocks_for(prompt + max output)
    prefix: PromptPrefix | None = field(default=None, compare=False)  # for routing by cached prefix


@dataclass(slots=True)
class WaitPredictor:
    prior_tokens_per_s: float = 500.0  # used until measurements outweigh it
    prior_weight_s: float = 2.0  # the prior counts as this much busy time
    half_life_s: float = 30.0  # of busy time: older measurements fade
    _backlog: dict[tuple[Tier, str], int] = field(default_factory=lambda: defaultdict(int))
    _weights: dict[str, float] = field(default_factory=dict)
    _tokens: float = 0.0  # decayed prefill tokens completed while busy
    _busy_s: float = 0.0  # decayed seconds with prefill backlog
    _since: float | None = None  # when the current busy stretch was last accounted

    # --- backlog ----------------------------------------------------------------------------

    def add(self, t: Ticket, now: float) -> None:
        """The ticket is admitted: its prompt is prefill work to do."""
        self._account(now)
        self._weights[t.tenant_id] = t.weight
        self._backlog[(t.tier, t.tenant_id)] += t.prompt_tokens

    def started(self, t: Ticket, cached_tokens: int, now: float) -> None:
        """Its first token came: the prefill is done (cached tokens cost nothing)."""
        self._account(now)
        self._remove(t)
        self._tokens += max(0, t.prompt_tokens - cached_tokens)

    def dropped(self, t: Ticket, now: float) -> None:
        """It left before its first token (refused, cancelled, failed)."""
        self._account(now)
        self._remove(t)

    def _remove(self, t: Ticket) -> None:
        key = (t.tier, t.tenant_id)
        left = self._backlog[key] - t.prompt_tokens
        if left > 0:
            self._backlog[key] = left
        else:
            del self._backlog[key]

    def _account(self, now: float) -> None:
        if self._since is not None and self._backlog:
            busy = max(0.0, now - self._since)
            decay = 0.5 ** (busy / self.half_life_s)
            self._tokens *= decay
            self._busy_s = self._busy_s * decay + busy
        self._since = now

    # --- prediction -------------------------------------------------------------------------

    @property
    def tokens_per_s(self) -> float:
        """Measured prefill rate, blended with the prior."""
        w = self.prior_weight_s
        return (self._tokens + self.prior_tokens_per_s * w) / (self._busy_s + w)

    def backlog_tokens(self, tier: Tier | None = None) -> int:
        return sum(v for (k, _), v in self._backlog.items() if tier is None or k == tier)

    def backlog_wait_s(self, tier: Tier) -> float:
        """Seconds to prefill the backlog of `tier` and the more urgent tiers (a metric: the most a
        new ticket of the tier would be predicted to wait)."""
        return sum(tokens for (k, _), tokens in self._backlog.items() if k <= tier) / self.tokens_per_s

    def predict_wait_s(self, tenant_id: str, weight: float, tier: Tier, cost: int) -> float:
        """Seconds before a new ticket's prefill would start under fair sharing."""
        ahead = 0.0
        for (k, tenant), tokens in self._backlog.items():
            if k < tier or (k == tier and tenant == tenant_id):
                ahead += tokens
            elif k == tier:
                ahead += min(tokens, cost * self._weights.get(tenant, 1.0) / weight)
        return ahead / self.tokens_per_s


class FairQueue:
    """Tickets waiting for a worker, popped in (tier, virtual start) order.

    Each tenant's tickets are tagged start = max(virtual time, the tenant's last finish) and
    finish = start + prompt_tokens / weight; the virtual time is the start tag of the ticket last
    popped. A tenant that was idle gets no credit; a heavy tenant's burst cannot starve others.
    """

    def __init__(self) -> None:
        self._items: list[tuple[Tier, float, int, Ticket]] = []  # (tier, start, arrival, ticket)
        self._finish: dict[tuple[Tier, str], float] = {}
        self._vtime: dict[Tier, float] = defaultdict(float)
        self._arrivals = itertools.count()

    def __len__(self) -> int:
        return len(self._items)

    def push(self, t: Ticket) -> None:
        key = (t.tier, t.tenant_id)
        start = max(self._vtime[t.tier], self._finish.get(key, 0.0))
        self._finish[key] = start + max(1, t.prompt_tokens) / t.weight
        self._items.append((t.tier, start, next(self._arrivals), t))
        self._items.sort(key=lambda item: item[:3])

    def place(self, t: Ticket) -> int:
        """The 1-based position `t` would take if it were pushed now (nothing changes)."""
        start = max(self._vtime[t.tier], self._finish.get((t.tier, t.tenant_id), 0.0))
        return 1 + sum(1 for item in self._items if item[:2] <= (t.tier, start))

    def head(self) -> Ticket | None:
        return self._items[0][3] if self._items else None

    def in_order(self) -> list[Ticket]:
        return [item[3] for item in self._items]

    def pop(self) -> Ticket:
        return self.take(self._items[0][3])

    def take(self, t: Ticket) -> Ticket:
        """Dequeues `t` to run (the head, or one that fits where the head does not)."""
        for i, (tier, start, _, queued) in enumerate(self._items):
            if queued is t:
                del self._items[i]
                self._vtime[tier] = max(self._vtime[tier], start)
                return t
        raise KeyError(t.generation_id)

    def remove(self, t: Ticket) -> None:
        """A waiting ticket leaves (cancelled or timed out); its tenant's tags are kept."""
        self._items = [item for item in self._items if item[3] is not t]
