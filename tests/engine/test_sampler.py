from __future__ import annotations

import torch

from engine.sampler import make_generator, sample
from engine.sequence import SamplingParams


def logits() -> torch.Tensor:
    return torch.tensor([0.1, 3.0, 2.9, -1.0, 0.5])


def test_greedy_takes_argmax_and_needs_no_generator() -> None:
    params = SamplingParams()
    assert make_generator(params) is None
    assert sample(logits(), params, None) == 1


def test_top_k_one_is_greedy_whatever_the_seed() -> None:
    for seed in range(20):
        params = SamplingParams(temperature=1.5, top_k=1, seed=seed)
        assert sample(logits(), params, make_generator(params)) == 1


def test_tiny_top_p_keeps_only_the_best_token() -> None:
    for seed in range(20):
        params = SamplingParams(temperature=1.0, top_p=0.01, seed=seed)
        assert sample(logits(), params, make_generator(params)) == 1


def test_top_k_two_only_draws_the_two_best() -> None:
    params = SamplingParams(temperature=2.0, top_k=2, seed=3)
    gen = make_generator(params)
    drawn = {sample(logits(), params, gen) for _ in range(200)}
    assert drawn == {1, 2}


def test_same_seed_same_draws() -> None:
    params = SamplingParams(temperature=1.0, seed=42)
    g1, g2 = make_generator(params), make_generator(params)
    assert [sample(logits(), params, g1) for _ in range(30)] == [
        sample(logits(), params, g2) for _ in range(30)
    ]
