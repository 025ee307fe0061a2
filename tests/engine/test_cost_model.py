"""The step cost model: exact fits, and the prefill budget it implies for each kind of step."""

from __future__ import annotations

import itertools

import pytest

from engine.cost_model import fit, measure, reference_step
from engine.step_budget import LATE_STEP, StepCost, due_budget, hurry_budget, prefill_budget


def test_fit_recovers_a_line() -> None:
    line = fit([(16, 0.010 + 16 * 0.0002), (64, 0.010 + 64 * 0.0002), (128, 0.010 + 128 * 0.0002)])
    assert line.intercept_s == pytest.approx(0.010)
    assert line.slope_s == pytest.approx(0.0002)


def test_fit_needs_two_sizes() -> None:
    with pytest.raises(ValueError, match="two step sizes"):
        fit([(64, 0.1), (64, 0.2)])


COST = StepCost(fixed_s=0.010, per_decode_s=0.001, per_prefill_token_s=0.0002)


def test_beside_interactive_decodes_a_step_stays_within_the_objective() -> None:
    # 40 ms of the 50 ms objective: (0.040 - 0.010 - 2 * 0.001) / 0.0002 = 140 tokens -> 128
    assert prefill_budget(COST, 2, interactive=True) == 128
    assert prefill_budget(COST, 2, interactive=True, itl_objective_s=0.1) == 336


def test_a_batch_too_large_for_the_objective_gets_half_its_decode_time_of_prefill() -> None:
    # 60 decodes alone take 70 ms: prefill may add 35 ms = 175 tokens -> 160
    assert prefill_budget(COST, 60, interactive=True) == 160


def test_without_interactive_decodes_a_step_may_last_the_idle_step() -> None:
    # 250 ms: (0.25 - 0.010 - 4 * 0.001) / 0.0002 = 1180 -> at most 512
    assert prefill_budget(COST, 4, interactive=False) == 512
    slow = StepCost(0.010, 0.001, 0.002)
    assert prefill_budget(slow, 0, interactive=False) == 112  # (0.25 - 0.01) / 0.002 = 120 -> 112


def test_budget_is_clamped() -> None:
    too_slow = StepCost(0.060, 0.001, 0.002)
    assert prefill_budget(too_slow, 1, interactive=True) == 16  # still progress
    assert prefill_budget(StepCost(0.0, 0.0, 1e-7), 1, interactive=True) == 512


def test_measure_times_each_probe_with_the_injected_clock(artifact_dir) -> None:
    import torch

    from engine.weights import load_model

    ticks = itertools.count()
    # each clock() call pair brackets one timed step: prefill of 16 and 32 tokens take 2 and 3
    # ticks, decode steps of 1 and 2 sequences 1.5 and 2 ticks (two repeats each), a 16-token
    # chunk after a cached 64-token prefix 12 then 9 ticks
    durations = iter([2, 2, 3, 3, 1.5, 1.5, 2, 2, 12, 9])
    now = [0.0]

    def clock() -> float:
        if next(ticks) % 2:
            now[0] += next(durations)
        return now[0]

    model = load_model(artifact_dir, torch.float32)
    cost = measure(model, torch.float32, (16, 32), (1, 2), repeats=2, clock=clock, context=(64, 16))
    assert cost.per_prefill_token_s == pytest.approx(1 / 16)
    assert cost.fixed_s == pytest.approx(1.0)
    assert cost.per_decode_s == pytest.approx(0.5)
    # the best chunk (9) less what 16 tokens at position 0 take (1 + 16 / 16), per (token, key) pair
    assert cost.per_attended_s == pytest.approx(7 / (16 * 64))


def test_the_reference_step_is_the_fastest_of_its_prefill_steps(artifact_dir) -> None:
    import torch

    from engine.weights import load_model

    times = iter([0.0, 5.0, 10.0, 13.0, 20.0, 24.0])  # steps of 5, 3 and 4 seconds
    model = load_model(artifact_dir, torch.float32)
    assert reference_step(model, torch.float32, clock=lambda: next(times)) == 3.0
    assert next(times, None) is None  # one bracketed step per repeat


def test_a_chunk_is_cut_to_what_its_context_leaves_of_the_budget() -> None:
    from engine.step_budget import chunk_fit

    cost = StepCost(0.010, 0.001, 0.001, per_attended_s=0.00001)  # a (token, key) pair: 1% of a token
    assert cost.chunk_charge(0, 100) == pytest.approx(100 * 2.0)
    assert cost.chunk_charge(900, 100) == pytest.approx(100 * 11.0)
    assert cost.chunk_tokens(0, 500, 200.0) == 100  # the most that fits: 101 tokens would cost 203
    assert cost.chunk_tokens(900, 500, 200.0) == 19  # 19 * 10.19 = 193.6; 20 * 10.2 = 204
    assert cost.chunk_tokens(900, 5, 200.0) == 5  # never more than the prompt has left
    assert chunk_fit(cost, 5000, 500, 20.0, prefilled=True) == 0  # 1 token at 5,000 costs 51
    assert chunk_fit(cost, 5000, 500, 20.0, prefilled=False) == 1  # a step's first chunk moves on
    assert chunk_fit(None, 5000, 500, 20.5, prefilled=True) == 20  # a fixed budget: a token each


# about what 2 cores measure for the int4 model: 7 ms a step, 1 ms a decode, 0.7 ms a prompt token
SLOW = StepCost(fixed_s=0.007, per_decode_s=0.001, per_prefill_token_s=0.0007)


def test_nothing_urgent_leaves_the_budget_alone() -> None:
    assert hurry_budget(SLOW, 4, 0.0) == 0.0
    # (0.040 - 0.011) / 0.0007 = 41.4 -> 32
    assert prefill_budget(SLOW, 4, interactive=True) == 32
    assert prefill_budget(SLOW, 4, interactive=True, urgent=0.0) == 32


def test_a_waiting_short_prompt_grows_the_budget_to_prefill_it_in_time() -> None:
    # 200 tokens: b steps of (0.011 + 0.0007 b) within 0.25 s -> b = 200 * 0.011 / (0.25 - 0.14) = 20
    assert hurry_budget(SLOW, 4, 200.0) == pytest.approx(20.0)
    assert prefill_budget(SLOW, 4, interactive=True, urgent=200.0) == 32  # the objective's budget is larger
    # 300 tokens: 300 * 0.011 / (0.25 - 0.21) = 82.5 -> 80, a 67 ms step
    assert hurry_budget(SLOW, 4, 300.0) == pytest.approx(82.5)
    assert prefill_budget(SLOW, 4, interactive=True, urgent=300.0) == 80


def test_hurrying_keeps_a_step_within_one_and_a_half_objectives() -> None:
    # 450 tokens cannot be prefilled in 0.25 s at 0.7 ms a token: the longest step, 75 ms
    longest = (0.075 - 0.011) / 0.0007
    assert hurry_budget(SLOW, 4, 450.0) == pytest.approx(longest)
    assert prefill_budget(SLOW, 4, interactive=True, urgent=450.0) == 80  # 91.4 -> 80
    assert hurry_budget(SLOW, 80, 450.0) == 0.0  # decodes alone past the bound: no hurry


def test_only_batch_work_may_take_a_longer_step() -> None:
    # (0.5 - 0.011) / 0.0007 = 698 -> 688; the same step with any interactive work: 0.25 s
    assert prefill_budget(SLOW, 4, interactive=False, batch_only=True) == 688
    assert prefill_budget(SLOW, 4, interactive=False) == 336  # (0.25 - 0.011) / 0.0007 = 341 -> 336
    slow = StepCost(0.010, 0.001, 0.002)
    assert prefill_budget(slow, 0, interactive=False, batch_only=True) == 240  # (0.5 - 0.01) / 0.002 = 245
    # a fast host: (0.5 - 0.014) / 0.0002 = 2430 -> at most 1024 with batch work alone, 512 otherwise
    assert prefill_budget(COST, 4, interactive=False, batch_only=True) == 1024
    assert prefill_budget(COST, 4, interactive=False) == 512


def test_nothing_due_adds_nothing() -> None:
    assert due_budget(SLOW, 4, None) == 0.0
    assert prefill_budget(SLOW, 4, interactive=True, due=None) == prefill_budget(SLOW, 4, interactive=True)


def test_what_is_due_gets_what_prefills_it_by_the_earliest_deadline() -> None:
    # 300 tokens with 0.5 s left: b steps of (0.011 + 0.0007 b) -> b = 300 * 0.011 / (0.5 - 0.21) = 11.4
    assert due_budget(SLOW, 4, (300.0, 0.5)) == pytest.approx(300 * 0.011 / 0.29)
    # 450 tokens with 0.365 s left: b = 450 * 0.011 / 0.05 = 99, past the hurried step's 91 tokens
    assert due_budget(SLOW, 4, (450.0, 0.365)) == pytest.approx(99.0)
    assert prefill_budget(SLOW, 4, interactive=True, urgent=450.0) == 80
    assert prefill_budget(SLOW, 4, interactive=True, urgent=450.0, due=(450.0, 0.365)) == 96


def test_a_deadline_past_or_out_of_reach_takes_the_longest_late_step() -> None:
    longest = (LATE_STEP * 0.050 - 0.011) / 0.0007  # 127 tokens, a 100 ms step
    assert due_budget(SLOW, 4, (300.0, -0.1)) == pytest.approx(longest)
    assert due_budget(SLOW, 4, (300.0, 0.2)) == pytest.approx(longest)  # 0.21 s of prefill alone
    assert due_budget(SLOW, 4, (300.0, 0.22)) == pytest.approx(longest)  # would need 330 a step
    assert prefill_budget(SLOW, 4, interactive=True, urgent=450.0, due=(450.0, 0.2)) == 112
    assert due_budget(SLOW, 150, (300.0, 0.2)) == 0.0  # decodes alone past the bound: no more
