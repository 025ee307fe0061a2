"""The acceptance rule on its own, against exact distributions: greedy takes the longest agreeing
prefix plus the target's token; sampled tokens and token pairs follow the target's distribution
(chi-square, fixed seeds) whatever the draft, deterministic or drawn from another distribution."""

from __future__ import annotations

import itertools

import pytest
import torch

from engine.sampler import distribution, sample
from engine.sequence import SamplingParams
from engine.speculative.verification import verify

V = 6  # a small vocabulary: every pair is a cell of the test
SAMPLES = 8_000
# chi-square critical values at a false-failure rate of 1e-4 per test (df = cells - 1)
CRITICAL_1E4 = {5: 25.74, 35: 75.74}
PARAMS = [
    SamplingParams(temperature=1.0, seed=1),
    SamplingParams(temperature=0.7, top_p=0.9, seed=2),
    SamplingParams(temperature=1.3, top_k=4, seed=3),
]


def test_greedy_keeps_the_agreeing_prefix_and_the_targets_token() -> None:
    logits = torch.full((4, V), -5.0)
    for row, best in enumerate([3, 1, 4, 0]):
        logits[row, best] = 5.0
    greedy = SamplingParams()
    assert verify(logits, [3, 1, 4], greedy, None).tokens == (3, 1, 4, 0)
    assert verify(logits, [3, 2, 4], greedy, None).tokens == (3, 1)
    assert verify(logits, [5, 1, 4], greedy, None).tokens == (3,)
    assert verify(logits[:1], [], greedy, None).tokens == (3,)


def chi_square(counts: torch.Tensor, expected: torch.Tensor) -> float:
    keep = expected > 0
    assert float(counts[~keep].sum()) == 0, "a token of probability 0 was drawn"
    return float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("drafter", ["certain", "sampled"])
def test_first_tokens_and_pairs_follow_the_target(params: SamplingParams, drafter: str) -> None:
    g = torch.Generator().manual_seed(100 + (params.seed or 0))
    target = torch.randn(V, generator=g) * 1.5  # p(x1) logits
    target_next = torch.randn(V, V, generator=g) * 1.5  # p(x2 | x1) logits, row x1
    draft_logits = target + torch.randn(V, generator=g)  # a draft that is close, not equal
    draft_next = target_next + torch.randn(V, V, generator=g)
    p1 = distribution(target, params)
    p2 = torch.stack([distribution(target_next[a], params) for a in range(V)])  # [V, V]
    q1 = torch.softmax(draft_logits, -1)
    q2 = torch.softmax(draft_next, -1)
    gen = torch.Generator().manual_seed(params.seed or 0)
    draws = torch.Generator().manual_seed(7)  # the drafter's own
    firsts = torch.zeros(V)
    pairs = torch.zeros(V, V)
    for _ in range(SAMPLES):
        if drafter == "certain":  # a fixed guess (prompt lookup): d1 = 0, d2 = its best follower
            d1 = 0
            d2 = int(torch.argmax(target_next[0]))
            probs = None
        else:
            d1 = int(torch.multinomial(q1, 1, generator=draws))
            d2 = int(torch.multinomial(q2[d1], 1, generator=draws))
            probs = torch.stack([q1, q2[d1]])
        rows = torch.stack([target, target_next[d1], torch.zeros(V)])  # row 2 unused by a pair
        out = verify(rows, [d1, d2], params, gen, probs).tokens
        first = out[0]
        second = out[1] if len(out) > 1 else sample(target_next[first], params, gen)  # the next step's
        firsts[first] += 1
        pairs[first, second] += 1
    assert chi_square(firsts, SAMPLES * p1) < CRITICAL_1E4[5]
    expected_pairs = SAMPLES * p1[:, None] * p2
    cells = int((expected_pairs > 0).sum())
    assert chi_square(pairs, expected_pairs) < critical(cells - 1)


def critical(df: int) -> float:
    """Chi-square critical value at a false-failure rate of 1e-4 (Wilson-Hilferty, within 1% here)."""
    z = 3.719  # the standard normal's 1 - 1e-4 quantile
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def test_the_critical_values_are_the_tables() -> None:
    assert critical(5) == pytest.approx(CRITICAL_1E4[5], rel=0.03)
    assert critical(35) == pytest.approx(CRITICAL_1E4[35], rel=0.01)


def test_all_pairs_are_reachable_once_drafts_are_rejected() -> None:
    """A draft the target never takes (probability 0 after top-k) is always rejected."""
    logits = torch.tensor([[5.0, 4.0, -9.0, -9.0, -9.0, -9.0]] * 2)
    params = SamplingParams(temperature=1.0, top_k=2, seed=0)
    gen = torch.Generator().manual_seed(0)
    seen = {verify(logits, [5], params, gen).tokens for _ in range(200)}
    assert seen <= {(0,), (1,)} and len(seen) == 2
    assert list(itertools.chain.from_iterable(seen)).count(5) == 0
