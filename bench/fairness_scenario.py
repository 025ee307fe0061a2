"""The fairness benchmark's scenario (bench/fairness.py): tenant A's documents in flight, tenant B's
short interactive requests and their arrivals, and the seed. Its own module, so that the benchmark
and its report (bench/fairness_report.py) both import it and neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class Scenario:
    docs_in_flight: int = 6
    doc_tokens: int = 1700
    doc_output: int = 64
    short_tokens: tuple[int, int] = (64, 128)  # inclusive range of B's prompt lengths
    short_output: int = 32
    rate: float = 0.5  # B's arrivals per s
    window_s: float = 60.0
    seed: int = 0
    b_weight: float = 1.0  # B's tenant weight (A's is 1): its share of the prefill budget when both wait


DEFAULTS = Scenario()
