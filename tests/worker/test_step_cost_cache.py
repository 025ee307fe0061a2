"""The measured step cost kept between loads: read back as written, keyed by everything that shapes
a step's time, and a missing or damaged file is a miss (the worker measures again); a cost whose
reference step now runs faster was measured on a busy host and is measured again; a worker that
measures loads alone, workers whose costs are cached load side by side."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from engine.step_budget import StepCost
from worker import step_cost_cache as cache

COST = StepCost(fixed_s=0.012, per_decode_s=0.0004, per_prefill_token_s=0.0013)
ENTRY = cache.Entry(COST, reference_s=0.090)
KEY_ARGS = ("smollm2-135m@abc", "float32", "bfloat16", "/var/kernels/k1/libllm_kernels.so", 1, 2)


def test_a_saved_cost_is_read_back_under_its_key(tmp_path: Path) -> None:
    key = cache.cache_key(*KEY_ARGS)
    assert cache.load(tmp_path, key) is None
    cache.save(tmp_path / "costs", key, ENTRY)
    assert cache.load(tmp_path / "costs", key) == ENTRY
    assert [p.name for p in (tmp_path / "costs").iterdir()] == [f"{key}.json"]  # no temporary left


def test_each_part_that_shapes_a_step_changes_the_key() -> None:
    base = cache.cache_key(*KEY_ARGS)
    assert cache.cache_key(*KEY_ARGS) == base
    for i, other in enumerate(("smollm2-135m@def", "bfloat16", "float32", "/var/kernels/k2/x.so", 2, 1)):
        args = list(KEY_ARGS)
        args[i] = other
        assert cache.cache_key(*args) != base, f"argument {i}"  # type: ignore[arg-type]


def test_an_edit_of_the_engines_sources_changes_the_key(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "kv_cache.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not a source")
    before = cache.engine_sources(tmp_path)
    (tmp_path / "notes.txt").write_text("still not a source")
    assert cache.engine_sources(tmp_path) == before
    (tmp_path / "kv_cache.py").write_text("x = 2\n")
    assert cache.engine_sources(tmp_path) != before
    base = cache.cache_key(*KEY_ARGS)
    monkeypatch.setattr(cache, "engine_sources", lambda: "another-engine")
    assert cache.cache_key(*KEY_ARGS) != base


def test_a_kernel_path_switch_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """`LLM_KERNELS_AMX_ATTENTION=0` and the like pick another kernel path in the same library: a cost
    measured on one path would size the other's steps (a bf16 cache's prefill attention takes about
    2.3x as long off AMX tiles, engine/csrc/attention_amx.h)."""
    monkeypatch.delenv("LLM_KERNELS_AMX_ATTENTION", raising=False)
    base = cache.cache_key(*KEY_ARGS)
    monkeypatch.setenv("LLM_KERNELS_AMX_ATTENTION", "0")
    assert cache.cache_key(*KEY_ARGS) != base
    monkeypatch.setenv("OTHER_SETTING", "1")
    off = cache.cache_key(*KEY_ARGS)
    monkeypatch.delenv("OTHER_SETTING")
    assert cache.cache_key(*KEY_ARGS) == off


def test_a_damaged_or_negative_entry_is_a_miss(tmp_path: Path) -> None:
    key = cache.cache_key(*KEY_ARGS)
    (tmp_path / f"{key}.json").write_text("{not json")
    assert cache.load(tmp_path, key) is None
    (tmp_path / f"{key}.json").write_text('{"fixed_s": 0.01, "per_decode_s": -1, "per_prefill_token_s": 0.1}')
    assert cache.load(tmp_path, key) is None
    (tmp_path / f"{key}.json").write_text('{"fixed_s": 0.01}')
    assert cache.load(tmp_path, key) is None
    cost = '"fixed_s": 0.01, "per_decode_s": 0.001, "per_prefill_token_s": 0.001, "per_attended_s": 0'
    (tmp_path / f"{key}.json").write_text("{" + cost + "}")  # written before reference steps were kept
    assert cache.load(tmp_path, key) is None
    (tmp_path / f"{key}.json").write_text("{" + cost + ', "reference_s": 0}')
    assert cache.load(tmp_path, key) is None
    (tmp_path / f"{key}.json").write_text("{" + cost + ', "reference_s": 0.05}')
    assert cache.load(tmp_path, key) == cache.Entry(StepCost(0.01, 0.001, 0.001, 0.0), 0.05)


class Probes:
    """The timed steps resolve() may run, recorded in order; the reference step takes `reference_s`."""

    def __init__(self, reference_s: float) -> None:
        self.reference_s = reference_s
        self.calls: list[str] = []

    def reference(self) -> float:
        self.calls.append("reference")
        return self.reference_s

    def measure(self) -> StepCost:
        self.calls.append("measure")
        return StepCost(0.010, 0.0003, 0.0011)


def resolve(cached: cache.Entry | None, probes: Probes) -> tuple[cache.Entry, str]:
    return cache.resolve(cached, probes.reference, probes.measure)


def test_a_missing_cost_is_measured_with_its_reference_step() -> None:
    probes = Probes(0.080)
    assert resolve(None, probes) == (cache.Entry(StepCost(0.010, 0.0003, 0.0011), 0.080), "measured")
    assert probes.calls == ["measure", "reference"]


@pytest.mark.parametrize("now_s", [0.090, 0.0766, 0.2])  # the same, within FASTER, much slower
def test_a_cached_cost_stands_unless_its_reference_step_now_runs_faster(now_s: float) -> None:
    probes = Probes(now_s)
    assert resolve(ENTRY, probes) == (ENTRY, "cached")
    assert probes.calls == ["reference"]  # a busier host now: its cost would be the pessimistic one


def test_a_cost_measured_on_a_busy_host_is_measured_again() -> None:
    probes = Probes(0.0764)  # more than 15% faster than the cached 90 ms
    entry, origin = resolve(ENTRY, probes)
    assert entry == cache.Entry(StepCost(0.010, 0.0003, 0.0011), 0.0764)
    assert origin == "measured again: the reference step took 76.4 ms, 90.0 ms when cached"
    assert probes.calls == ["reference", "measure", "reference"]


def try_lock(folder: Path, mode: int) -> bool:
    """Whether another worker could take the folder's lock in `mode` now (without waiting)."""
    with open(folder / ".lock", "w") as other:
        try:
            fcntl.flock(other, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_a_cached_load_takes_the_lock_exclusively_to_time_its_steps(tmp_path: Path) -> None:
    with cache.loading(tmp_path / "costs", measuring=False) as hold:
        assert try_lock(tmp_path / "costs", fcntl.LOCK_SH) is True
        hold.exclusive()
        assert try_lock(tmp_path / "costs", fcntl.LOCK_SH) is False
    assert try_lock(tmp_path / "costs", fcntl.LOCK_EX) is True
    with cache.loading(None, measuring=False) as hold:
        hold.exclusive()  # no folder, no lock: nothing to wait for


@pytest.mark.parametrize("measuring", [True, False])
def test_a_measuring_load_excludes_every_other_load_and_cached_loads_share(
    tmp_path: Path, measuring: bool
) -> None:
    with cache.loading(tmp_path / "costs", measuring):
        assert try_lock(tmp_path / "costs", fcntl.LOCK_SH) is not measuring  # a cached load beside it
        assert try_lock(tmp_path / "costs", fcntl.LOCK_EX) is False  # a measuring one never
    assert try_lock(tmp_path / "costs", fcntl.LOCK_EX) is True  # released at the end
