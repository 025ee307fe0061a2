"""The step cost model: an exact fit, and the budget it implies."""

from __future__ import annotations

import itertools

import pytest

from engine.cost_model import StepCost, chunk_budget, fit, measure


def test_fit_recovers_a_line() -> None:
    cost = fit([(16, 0.010 + 16 * 0.0002), (64, 0.010 + 64 * 0.0002), (128, 0.010 + 128 * 0.0002)])
    assert cost.fixed_s == pytest.approx(0.010)
    assert cost.per_token_s == pytest.approx(0.0002)


def test_fit_needs_two_sizes() -> None:
    with pytest.raises(ValueError, match="two step sizes"):
        fit([(64, 0.1), (64, 0.2)])


def test_budget_keeps_a_step_within_the_objective() -> None:
    # 40 ms of the 50 ms objective: (0.040 - 0.010) / 0.0002 = 150 tokens -> 144
    assert chunk_budget(StepCost(0.010, 0.0002)) == 144
    assert chunk_budget(StepCost(0.010, 0.0002), itl_objective_s=0.1) == 336


def test_budget_is_clamped() -> None:
    assert chunk_budget(StepCost(0.060, 0.0002)) == 16  # too slow for the objective: still progress
    assert chunk_budget(StepCost(0.0, 1e-7)) == 512


def test_measure_times_each_size_with_the_injected_clock(artifact_dir) -> None:
    import torch

    from engine.weights import load_model

    ticks = itertools.count()
    # every step takes "1 + n/16" ticks: each clock() call pair brackets one step
    sizes = (16, 32)
    durations = iter([2, 2, 3, 3])  # two repeats per size
    now = [0.0]

    def clock() -> float:
        if next(ticks) % 2:
            now[0] += next(durations)
        return now[0]

    cost = measure(load_model(artifact_dir, torch.float32), torch.float32, sizes, repeats=2, clock=clock)
    assert cost.fixed_s == pytest.approx(1.0)
    assert cost.per_token_s == pytest.approx(1 / 16)
