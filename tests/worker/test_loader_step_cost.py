"""The worker's step cost at load (worker/loader.py `_step_cost`), its timed steps faked:
steps are timed only once the cache folder's lock is held exclusively, and the entry is read again
under it, so a load that waited for another load of the same version uses what that one measured."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import cost_model
from engine.step_budget import StepCost
from worker import loader
from worker import step_cost_cache as cache

KEY = "k1"
MEASURED = StepCost(0.004, 0.0018, 0.0012)


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log_info(self, message: str) -> None:
        self.lines.append(message)


class Hold:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def exclusive(self) -> None:
        self.calls.append("exclusive")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The timed steps, in order; the reference step takes 80 ms."""
    seen: list[str] = []

    def timed(name: str, result: object = None) -> object:
        seen.append(name)
        return result

    monkeypatch.setattr(cost_model, "warm_up", lambda *a, **k: timed("warm_up"))
    monkeypatch.setattr(cost_model, "reference_step", lambda *a, **k: timed("reference", 0.080))
    monkeypatch.setattr(cost_model, "measure", lambda *a, **k: timed("measure", MEASURED))
    return seen


def step_cost(folder: Path, cached: cache.Entry | None, calls: list[str], log: Log) -> StepCost:
    hold = Hold(calls)
    return loader._step_cost(None, ("float32", "bfloat16"), str(folder), KEY, cached, hold, log)  # type: ignore[arg-type]


def test_a_missing_cost_is_measured_under_the_exclusive_lock_and_saved(
    tmp_path: Path, calls: list[str]
) -> None:
    log = Log()
    assert step_cost(tmp_path, None, calls, log) == MEASURED
    assert calls == ["exclusive", "measure", "reference"]
    assert cache.load(tmp_path, KEY) == cache.Entry(MEASURED, 0.080)
    assert log.lines[0].startswith("step cost (measured) 4.0 ms + 1.80 ms a decode + 1.200 ms a prompt token")


def test_the_entry_is_read_again_under_the_lock(tmp_path: Path, calls: list[str]) -> None:
    fresh = cache.Entry(StepCost(0.005, 0.002, 0.0013), 0.085)  # another load measured it meanwhile
    cache.save(tmp_path, KEY, fresh)
    stale = cache.Entry(StepCost(0.009, 0.004, 0.0026), 0.170)  # what this load read before the lock
    assert step_cost(tmp_path, stale, calls, Log()) == fresh.cost
    assert calls == ["exclusive", "warm_up", "reference"]  # 80 ms is within 15% of 85: kept
    assert cache.load(tmp_path, KEY) == fresh


def test_a_stale_entry_is_measured_again_and_replaced(tmp_path: Path, calls: list[str]) -> None:
    cache.save(tmp_path, KEY, cache.Entry(StepCost(0.009, 0.004, 0.0026), 0.170))
    log = Log()
    assert step_cost(tmp_path, None, calls, log) == MEASURED
    assert calls == ["exclusive", "warm_up", "reference", "measure", "reference"]
    assert cache.load(tmp_path, KEY) == cache.Entry(MEASURED, 0.080)
    assert "measured again: the reference step took 80.0 ms, 170.0 ms when cached" in log.lines[0]
