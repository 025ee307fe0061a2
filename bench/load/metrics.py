"""Serving figures from what a client saw of each request: TTFT, inter-token gaps, TPOT, end-to-end
latency, throughput, errors by status, and goodput against latency objectives. Pure.

Definitions (times are seconds on one monotonic clock):
    TTFT      first output token received - the request's scheduled send time (queue wait included)
    ITL       the gap between two successive token deliveries of one request (a delivery carrying k
              tokens counts as one gap), pooled over all requests
    TPOT      per request: (end - first token) / (output tokens - 1)
    e2e       end - scheduled send time
    duration  last end - first scheduled send time, over every request of the run
    goodput   requests that finished in full with TTFT <= ttft objective and their own p95 ITL <=
              itl objective: their share of all requests, and their output tokens per second
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(slots=True)
class Outcome:
    """One request as its client saw it."""

    index: int  # RequestSpec.index
    kind: str  # "interactive" or "document"
    sent: float  # scheduled send time
    expected_tokens: int  # output tokens asked for (forced)
    deliveries: list[tuple[float, int]] = field(default_factory=list)  # (received at, tokens) each
    end: float = 0.0  # when the request finished, failed or not
    cached_tokens: int = 0  # prompt tokens the target served from its prefix cache (when it says)
    error: str | None = None  # gRPC status name, FINISHED_<reason>, or another failure; None: served

    @property
    def output_tokens(self) -> int:
        return sum(k for _, k in self.deliveries)

    @property
    def ttft(self) -> float | None:
        return self.deliveries[0][0] - self.sent if self.deliveries else None

    @property
    def gaps(self) -> list[float]:
        times = [t for t, _ in self.deliveries]
        return [b - a for a, b in itertools.pairwise(times)]

    @property
    def tpot(self) -> float | None:
        n = self.output_tokens
        return (self.end - self.deliveries[0][0]) / (n - 1) if n > 1 else None

    @property
    def e2e(self) -> float:
        return self.end - self.sent


@dataclass(slots=True, frozen=True)
class Objectives:
    ttft_s: float  # each request's TTFT must be at most this
    itl_p95_s: float  # each request's own p95 inter-token gap must be at most this


def meets(o: Outcome, slo: Objectives) -> bool:
    if o.error is not None or o.ttft is None or o.ttft > slo.ttft_s:
        return False
    gaps = o.gaps
    return not gaps or percentile(gaps, 95) <= slo.itl_p95_s


def spread(values: list[float]) -> dict[str, float] | None:
    """p50 / p95 / p99 / mean of values, or None when there are none."""
    if not values:
        return None
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "mean": sum(values) / len(values),
    }


def summarize(outcomes: list[Outcome], slo: Objectives) -> dict[str, Any]:
    """The run's figures; latency spreads are over requests served in full."""
    if not outcomes:
        raise ValueError("no requests")
    ok = [o for o in outcomes if o.error is None]
    duration = max(o.end for o in outcomes) - min(o.sent for o in outcomes)
    good = [o for o in ok if meets(o, slo)]
    return {
        "requests": len(outcomes),
        "completed": len(ok),
        "duration_s": duration,
        "request_per_s": len(ok) / duration,
        "output_tok_per_s": sum(o.output_tokens for o in outcomes) / duration,
        "ttft_s": spread([o.ttft for o in ok if o.ttft is not None]),
        "ttft_by_kind_s": {
            kind: spread([o.ttft for o in ok if o.kind == kind and o.ttft is not None])
            for kind in sorted({o.kind for o in ok})
        },
        "itl_s": spread([g for o in ok for g in o.gaps]),
        "tpot_s": spread([o.tpot for o in ok if o.tpot is not None]),
        "e2e_s": spread([o.e2e for o in ok]),
        "errors": dict(sorted(Counter(o.error for o in outcomes if o.error is not None).items())),
        "goodput_share": len(good) / len(outcomes),
        "goodput_tok_per_s": sum(o.output_tokens for o in good) / duration,
        "cached_prompt_tokens": sum(o.cached_tokens for o in outcomes),
    }
