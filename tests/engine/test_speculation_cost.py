"""Prompt lookup and the speculation cost model: pure functions, exact values."""

from __future__ import annotations

import pytest

from engine.speculative import ngram
from engine.speculative.speculation_cost import (
    PROBE_EVERY,
    PROBE_TOKENS,
    SeqSpeculation,
    SpeculationCost,
    expected_tokens,
)


def test_prompt_lookup_takes_the_longest_latest_match() -> None:
    tokens = [1, 2, 3, 9, 9, 5, 2, 3, 7, 8, 1, 2, 3]
    # "1 2 3" occurred at 0 (followed by 9 9 5); "2 3" alone later at 6 (7 8) loses to the longer
    assert ngram.propose(tokens, 3) == (9, 9, 5)
    assert ngram.propose([4, 5, 6, 4, 5, 6, 4, 5], 4) == (6, 4, 5)  # the latest "4 5", and what follows
    assert ngram.propose([1, 2, 3, 4], 3) == ()  # nothing repeats
    assert ngram.propose([7, 1, 7], 5) == (1, 7)  # up to the end of the tokens
    assert ngram.propose([7, 1, 7], 0) == ()


def test_expected_tokens_of_a_draft() -> None:
    assert expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(1.0, 4) == 5.0
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)


def test_acceptance_is_measured_per_sequence() -> None:
    s = SeqSpeculation(residency=0)
    start = s.acceptance
    s.record(drafted=4, accepted=0)
    assert s.acceptance < start
    for _ in range(30):
        s.record(drafted=4, accepted=4)
    assert s.acceptance > 0.95


def test_the_cost_model_speculates_only_where_it_pays() -> None:
    cost = SpeculationCost(draft_relative=0.3)
    assert cost.choose(0.9, 8) == 0  # a plain step is measured first
    cost.observe_plain(0.100)
    assert cost.choose(0.9, 8) == PROBE_TOKENS  # then a verify step
    cost.observe_verify(3, 0.110)
    cost.observe_draft(2, 0.020)
    assert cost.choose(0.9, 8) > 2  # cheap drafts, cheap verification, high acceptance: far
    assert cost.choose(0.9, 1) == 1  # never past the limit
    assert cost.choose(0.05, 8) == 0  # drafts rejected: no
    slow = SpeculationCost(draft_relative=0.0)
    slow.observe_plain(0.100)
    slow.observe_verify(3, 0.400)  # verification costs 4 plain steps: never pays
    decisions = [slow.choose(0.9, 8) for _ in range(PROBE_EVERY)]
    assert decisions[:-1] == [0] * (PROBE_EVERY - 1)
    assert decisions[-1] == PROBE_TOKENS  # a probe now and then, to see whether that changed
