"""Serving figures from client-side timings: percentiles, per-request latencies, goodput, errors."""

from __future__ import annotations

import pytest

from bench.load.metrics import Objectives, Outcome, meets, percentile, spread, summarize


def served(
    index: int, sent: float, times: list[float], end: float | None = None, kind: str = "interactive"
) -> Outcome:
    """A request that received one token at each of `times`."""
    return Outcome(index, kind, sent, len(times), [(t, 1) for t in times], end or times[-1])


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (10.0, 19.0, 20.0)
    assert percentile([3.0], 95) == 3.0


def test_a_requests_ttft_gaps_tpot_and_e2e() -> None:
    o = served(0, sent=10.0, times=[10.5, 10.6, 10.8, 11.1])
    assert o.ttft == pytest.approx(0.5)
    assert o.gaps == pytest.approx([0.1, 0.2, 0.3])
    assert o.tpot == pytest.approx(0.2)  # (11.1 - 10.5) / 3
    assert o.e2e == pytest.approx(1.1)
    assert o.output_tokens == 4


def test_a_delivery_of_several_tokens_is_one_gap_and_counts_every_token() -> None:
    o = Outcome(0, "interactive", 0.0, 5, [(1.0, 1), (1.5, 3), (2.0, 1)], end=2.0)
    assert (o.output_tokens, o.gaps, o.tpot) == (5, [0.5, 0.5], 0.25)


def test_one_token_has_no_tpot_and_no_token_has_no_ttft() -> None:
    assert served(0, 0.0, [1.0]).tpot is None
    failed = Outcome(0, "interactive", 0.0, 8, end=3.0, error="UNAVAILABLE")
    assert (failed.ttft, failed.tpot, failed.gaps) == (None, None, [])


def test_goodput_needs_ttft_and_the_requests_own_p95_gap_within_objectives() -> None:
    slo = Objectives(ttft_s=1.0, itl_p95_s=0.25)
    assert meets(served(0, 0.0, [1.0, 1.25]), slo)  # at both limits
    assert not meets(served(0, 0.0, [1.01, 1.1]), slo)  # TTFT over
    assert not meets(served(0, 0.0, [0.5, 0.6, 0.9]), slo)  # p95 of [0.1, 0.3] is 0.3
    assert meets(served(0, 0.0, [0.5]), slo)  # no gaps: nothing to miss
    assert not meets(Outcome(0, "interactive", 0.0, 1, [(0.1, 1)], 0.1, error="CANCELLED"), slo)


def test_spread_is_none_without_values() -> None:
    assert spread([]) is None
    assert spread([1.0, 3.0]) == {"p50": 1.0, "p95": 3.0, "p99": 3.0, "mean": 2.0}


def test_summarize_counts_throughput_over_the_whole_run_and_errors_by_status() -> None:
    outcomes = [
        served(0, 0.0, [0.5, 0.6, 0.7, 0.8]),  # meets: TTFT 0.5, gaps 0.1
        served(1, 1.0, [3.0, 3.5, 4.0]),  # TTFT 2.0: misses
        Outcome(2, "document", 2.0, 4, end=2.5, error="UNAVAILABLE"),
        Outcome(3, "document", 2.0, 4, end=3.0, error="UNAVAILABLE"),
        Outcome(4, "interactive", 3.0, 4, [(3.5, 1)], end=3.6, error="FINISHED_CANCELED"),
    ]
    s = summarize(outcomes, Objectives(ttft_s=1.0, itl_p95_s=0.25))
    assert (s["requests"], s["completed"], s["duration_s"]) == (5, 2, 4.0)
    assert s["request_per_s"] == 0.5
    assert s["output_tok_per_s"] == 2.0  # 4 + 3 + 1 delivered tokens in 4 s
    assert s["errors"] == {"FINISHED_CANCELED": 1, "UNAVAILABLE": 2}
    assert s["ttft_s"] == {"p50": 0.5, "p95": 2.0, "p99": 2.0, "mean": 1.25}
    assert s["ttft_by_kind_s"] == {"interactive": s["ttft_s"]}  # the documents all failed
    assert s["itl_s"]["p50"] == pytest.approx(0.1) and s["itl_s"]["p95"] == pytest.approx(0.5)
    assert s["goodput_share"] == 0.2 and s["goodput_tok_per_s"] == 1.0


def test_summarize_refuses_an_empty_run() -> None:
    with pytest.raises(ValueError, match="no requests"):
        summarize([], Objectives(1.0, 0.25))
