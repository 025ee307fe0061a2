from __future__ import annotations

import pytest
import torch

from contracts.sampling import GREEDY_BELOW_TEMPERATURE
from engine.sampler import Sampled, SamplingError, make_generator, sample, sample_batch
from engine.sequence import EngineRequest, SamplingParams, Sequence


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


def test_temperatures_below_the_floor_are_greedy_and_need_no_generator() -> None:
    for temperature in (1e-45, 1e-30, GREEDY_BELOW_TEMPERATURE / 2):
        params = SamplingParams(temperature=temperature, seed=1)
        assert params.greedy and make_generator(params) is None
        assert sample(logits(), params, None) == 1
    assert not SamplingParams(temperature=GREEDY_BELOW_TEMPERATURE).greedy


def test_the_smallest_sampling_temperature_draws_the_best_token_without_overflow() -> None:
    params = SamplingParams(temperature=GREEDY_BELOW_TEMPERATURE, seed=7)
    huge = torch.tensor([3.0e38, -3.0e38, 1.0e38, 0.0])  # scaled by 1/T these overflow fp32
    assert sample(huge, params, make_generator(params)) == 0


@pytest.mark.parametrize(
    "row",
    [
        [0.1, float("nan"), 2.0],
        [0.1, float("inf"), 2.0],
        [float("-inf")] * 3,
    ],
    ids=["nan", "plus-inf", "all-minus-inf"],
)
def test_a_row_that_is_not_a_distribution_raises_sampling_error(row: list[float]) -> None:
    for params in (SamplingParams(), SamplingParams(temperature=1.0, seed=1)):
        with pytest.raises(SamplingError):
            sample(torch.tensor(row), params, make_generator(params))


def test_minus_inf_marks_a_token_that_is_never_drawn() -> None:
    params = SamplingParams(temperature=2.0, seed=3)
    gen = make_generator(params)
    row = torch.tensor([0.0, float("-inf"), 0.0])
    assert {sample(row, params, gen) for _ in range(100)} == {0, 2}


def test_a_batch_row_that_cannot_be_sampled_fails_alone() -> None:
    def seq(rid: str, temperature: float) -> Sequence:
        params = SamplingParams(temperature=temperature, seed=11)
        request = EngineRequest(rid, (1,), 4, params)
        return Sequence(request, 0, make_generator(params), [1])

    seqs = [seq("greedy", 0.0), seq("broken", 1.0), seq("hot", 1.0), seq("broken-greedy", 0.0)]
    rows = torch.stack([logits(), torch.full((5,), float("nan")), logits(), torch.full((5,), float("inf"))])
    sampled = sample_batch(seqs, rows)
    assert sampled.failed == {"broken": "SamplingError", "broken-greedy": "SamplingError"}
    assert set(sampled.tokens) == {"greedy", "hot"} and sampled.tokens["greedy"] == 1
    assert sample_batch([], torch.empty((0, 5))) == Sampled({}, {})
