"""The fairness benchmark's pure parts: its seeded arrival schedule, percentiles and run order."""

from __future__ import annotations

from bench.fairness import RunSpec, arrivals, percentile, run_order


def test_arrivals_are_seeded_increasing_and_inside_the_window() -> None:
    times = arrivals(0.5, 60.0, seed=0)
    assert times == arrivals(0.5, 60.0, seed=0) != arrivals(0.5, 60.0, seed=1)
    assert times == sorted(times) and times[0] > 0 and times[-1] < 60.0


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (10.0, 19.0, 20.0)
    assert percentile([3.0], 95) == 3.0


def test_each_fcfs_baseline_runs_right_after_the_fair_run_of_its_budget() -> None:
    assert [r.name for r in run_order([64, 256], [64])] == ["fair@64", "fcfs@64", "fair@256"]
    assert [r.name for r in run_order([64], [128])] == ["fair@64", "fcfs@128"]
    assert run_order([], [64]) == [RunSpec(False, 64)]
