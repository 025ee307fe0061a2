"""The live registry's retention: a run whose log closed stays resumable `retain_s`, then is
forgotten, oldest first (frontend/live.py). The registry's clock is a counter set by the test."""

from __future__ import annotations

from frontend.live import LiveGeneration, LiveRegistry
from frontend.stream_log import EventLog


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(gid: str, tenant: str = "t1") -> LiveGeneration:
    return LiveGeneration(gid, tenant, EventLog(gid))


def registry(clock: Clock, retain_s: float = 10.0) -> LiveRegistry:
    return LiveRegistry(grace_s=1.0, retain_s=retain_s, clock=clock)


def test_a_closed_run_is_retained_for_retain_s_then_forgotten_oldest_first() -> None:
    clock = Clock()
    live = registry(clock)
    runs = [run(f"g{i}") for i in range(3)]
    for i, r in enumerate(runs):
        live.add(r)
        clock.now = float(i)
        live.closed(r)
    assert [r.closed_at for r in runs] == [0.0, 1.0, 2.0]
    clock.now = 10.0  # g0 closed exactly retain_s ago: still retained
    live.forget_expired()
    assert [live.get(f"g{i}") for i in range(3)] == runs
    clock.now = 11.5  # g0 and g1 older than retain_s
    live.forget_expired()
    assert live.get("g0") is None and live.get("g1") is None
    assert live.retained("t1", "g2") is runs[2]
    clock.now = 12.5
    assert live.retained("t1", "g2") is None  # retained() forgets first


def test_a_run_whose_log_is_open_is_never_forgotten() -> None:
    clock = Clock()
    live = registry(clock)
    open_run, done = run("open"), run("done")
    live.add(open_run)
    live.add(done)
    live.closed(done)
    clock.now = 1_000.0
    live.forget_expired()
    assert live.get("open") is open_run and live.get("done") is None
    assert live.open() == [open_run]


def test_a_run_added_again_under_its_id_outlives_the_old_ones_expiry() -> None:
    """A generation run again on this frontend (a new attempt under the same id) replaces the
    retained run; the old run's expiry must not drop the new one."""
    clock = Clock()
    live = registry(clock)
    old = run("g")
    live.add(old)
    live.closed(old)
    clock.now = 5.0
    new = run("g")
    live.add(new)
    clock.now = 20.0  # the old run's retention is over; the new one is still running
    live.forget_expired()
    assert live.get("g") is new
    live.closed(new)
    clock.now = 30.5
    live.forget_expired()
    assert live.get("g") is None


def test_another_tenants_retained_run_is_not_found() -> None:
    clock = Clock()
    live = registry(clock)
    r = run("g", tenant="t1")
    live.add(r)
    live.closed(r)
    assert live.retained("t1", "g") is r
    assert live.retained("t2", "g") is None
